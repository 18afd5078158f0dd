"""End to end: command accepted by the server -> event received by a JetStream subscriber.

Starts a throwaway ``nats-server`` and ``eventcoord serve --nats <it>`` on a fresh data
folder (SQLite; ``--db`` for PostgreSQL), registers sessions, then ``wrk`` posts
heartbeat_agent commands at about ``--rate`` per second (64 connections, each pausing
64 000 / rate ms between requests with wrk's ``delay()``) for ``--seconds``, while a
subscriber (``eventcoord.client.subscribe``) in this process receives the events.
Latency = receive time - the event's ``recorded_at`` (stamped when the server decided and
committed the command, same host clock). Prints the achieved rate, p50/p90/p99/max, and
how many events arrived. (A Python HTTP client cannot drive 1,000 commands/s on this
2-core machine beside the server; wrk, a C program, can.)

    .venv/bin/python bench/stream_latency.py                    # ~1,000 commands/s for 10 s
    .venv/bin/python bench/stream_latency.py --rate 2000 --db postgresql+asyncpg://postgres@127.0.0.1:5432/DB
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

from eventcoord.client.subscriber import subscribe
from eventcoord.outbox.broker import throwaway_broker

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rate", type=float, default=1000.0)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--sessions", type=int, default=64)
    p.add_argument("--db", default=None)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ec-stream-bench-"))
    async with throwaway_broker(str(work / "broker")) as broker:
        port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "eventcoord.cli",
            "serve",
            "--data-dir",
            str(work / "data"),
            "--nats",
            broker.url,
            "--port",
            str(port),
        ]
        if args.db:
            cmd += ["--db", args.db]
        server = subprocess.Popen(
            cmd,
            env={**os.environ, "EVENTCOORD_BOOTSTRAP_TOKEN": TOKEN, "EVENTCOORD_RATE_LIMITS": "off"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(
                base_url=base,
                headers={"authorization": f"Bearer {TOKEN}"},
                timeout=httpx.Timeout(30, pool=None),
                limits=httpx.Limits(max_connections=128),
            ) as http:
                for _ in range(100):
                    try:
                        if (await http.get("/health")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.1)
                sessions = []
                for i in range(args.sessions):
                    r = await http.post("/v1/commands", json={"type": "register_agent", "actor": f"bench-{i}"})
                    sessions.append(r.json()["result"]["session_id"])
                start_after = (await http.get("/health")).json()["head"]
            received: list[float] = []
            script = work / "load.lua"
            ids = ", ".join(f'"{sid}"' for sid in sessions)
            script.write_text(
                f"local sessions = {{{ids}}}\nlocal i = 0\n"
                "request = function()\n  i = i + 1\n"
                '  local body = \'{"type":"heartbeat_agent","session_id":"\' .. sessions[(i % #sessions) + 1] .. '
                "'\"}'\n"
                f"  return wrk.format('POST', '/v1/commands', {{['Authorization'] = 'Bearer {TOKEN}', "
                f"['Content-Type'] = 'application/json'}}, body)\n"
                "end\n"
                f"delay = function() return {64000 / args.rate:.3f} end\n"
            )

            async def listen() -> None:
                async for ev in subscribe(broker.url, workspace="default", after=start_after):
                    now = time.time()
                    recorded = datetime.fromisoformat(ev.recorded_at.replace("Z", "+00:00")).timestamp()
                    received.append((now - recorded) * 1000)

            listener = asyncio.create_task(listen())
            await asyncio.sleep(0.5)
            wrk = await asyncio.create_subprocess_exec(
                "wrk",
                "-t1",
                "-c64",
                f"-d{args.seconds:.0f}s",
                "-s",
                str(script),
                base,
                stdout=asyncio.subprocess.PIPE,
            )
            await wrk.communicate()
            head = httpx.get(base + "/health").json()["head"]
            deadline = time.monotonic() + 30
            while start_after + len(received) < head and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            listener.cancel()
            sent = head - start_after
            lat = sorted(received)
            q = statistics.quantiles(lat, n=100)
            print(
                f"backend={'postgresql' if args.db else 'sqlite'} target={args.rate:.0f}/s "
                f"achieved={sent / args.seconds:.0f}/s commands={sent} received={len(received)}"
            )
            print(
                f"committed -> received: p50 {q[49]:.2f} ms  p90 {q[89]:.2f} ms  p99 {q[98]:.2f} ms  max "
                f"{lat[-1]:.2f} ms"
            )
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
