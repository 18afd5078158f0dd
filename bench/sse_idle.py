"""CPU of ``eventcoord serve`` holding many idle Server-Sent Events streams.

Starts ``eventcoord serve --nats off`` on a fresh data folder (SQLite; ``--db`` for a
PostgreSQL URL), opens ``--streams`` idle ``/v1/events/stream`` connections (raw sockets,
so the client side costs almost nothing), waits until the server has answered every one
(its first comment line), lets it settle, then samples the server process's CPU time
(utime + stime from ``/proc/<pid>/stat``) over ``--seconds``. Prints the share of one core
it used, and checks each stream is still open and received its keep-alive comments
(``--keepalive`` seconds; the default 15 is the server's). With ``--events N`` it also
posts N commands during the window and checks every stream received all of them.

    .venv/bin/python bench/sse_idle.py                       # 1,000 idle streams, 30 s
    .venv/bin/python bench/sse_idle.py --streams 1000 --seconds 30 --keepalive 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (and its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Stream:
    """One idle SSE connection; counts what arrives without parsing more than it must."""

    def __init__(self) -> None:
        self.buffer = b""
        self.keepalives = 0
        self.events = 0
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self, port: int) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        self.writer.write(
            f"GET /v1/events/stream HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        await self.writer.drain()

    async def read_until(self, marker: bytes) -> None:
        assert self.reader is not None
        while marker not in self.buffer:
            chunk = await self.reader.read(65536)
            if not chunk:
                raise ConnectionError("stream closed")
            self.buffer += chunk

    async def drain_forever(self) -> None:
        assert self.reader is not None
        while True:
            chunk = await self.reader.read(65536)
            if not chunk:
                return
            self.keepalives += chunk.count(b": keep-alive\n")
            self.events += chunk.count(b"\nid: ") + chunk.startswith(b"id: ")


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--settle", type=float, default=5.0)
    p.add_argument("--keepalive", type=float, default=15.0)
    p.add_argument("--events", type=int, default=0)
    p.add_argument("--db", default=None)
    p.add_argument(
        "--serve-cmd", default=None, help="measure another build (a command line) in place of eventcoord serve"
    )
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ec-sse-bench-"))
    port = free_port()
    base_cmd = args.serve_cmd.split() if args.serve_cmd else [sys.executable, "-m", "eventcoord.cli"]
    cmd = [*base_cmd, "serve", "--data-dir", str(work / "data"), "--nats", "off", "--port", str(port)]
    if args.db:
        cmd += ["--db", args.db]
    env = {**os.environ, "EVENTCOORD_BOOTSTRAP_TOKEN": TOKEN, "EVENTCOORD_SSE_KEEPALIVE_SECONDS": str(args.keepalive)}
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    streams = [Stream() for _ in range(args.streams)]
    try:
        async with httpx.AsyncClient(base_url=base, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            for _ in range(300):
                try:
                    if (await http.get("/health")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
            opened = time.monotonic()
            for i in range(0, len(streams), 100):
                await asyncio.gather(*(s.open(port) for s in streams[i : i + 100]))
            await asyncio.gather(*(s.read_until(b": eventcoord stream") for s in streams))
            print(f"{len(streams)} streams open in {time.monotonic() - opened:.1f} s", flush=True)
            drains = [asyncio.create_task(s.drain_forever()) for s in streams]
            await asyncio.sleep(args.settle)
            sid = None
            if args.events:
                sid = (await http.post("/v1/commands", json={"type": "register_agent", "actor": "bench"})).json()[
                    "result"
                ]["session_id"]
            before_ka = sum(s.keepalives for s in streams)
            c0, t0 = cpu_seconds(server.pid), time.monotonic()
            if sid is not None:
                for _ in range(args.events):
                    r = await http.post("/v1/commands", json={"type": "heartbeat_agent", "session_id": sid})
                    assert r.status_code == 200, r.text
            await asyncio.sleep(max(0.0, args.seconds - (time.monotonic() - t0)))
            c1, t1 = cpu_seconds(server.pid), time.monotonic()
            share = (c1 - c0) / (t1 - t0)
            alive = sum(not d.done() for d in drains)
            got_ka = sum(s.keepalives for s in streams) - before_ka
            print(f"server CPU over {t1 - t0:.1f} s with {len(streams)} idle streams: {share * 100:.2f} % of one core")
            print(f"streams still open: {alive}/{len(streams)}; keep-alive comments received in the window: {got_ka}")
            if args.events:
                await asyncio.sleep(1.0)
                short = sum(s.events < args.events + 1 for s in streams)
                print(f"{args.events + 1} events posted; streams that missed any: {short}")
            for d in drains:
                d.cancel()
    finally:
        for s in streams:
            if s.writer is not None:
                s.writer.close()
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
