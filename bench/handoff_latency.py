"""Hand-off latency (docs/protocol.md#waiting): release_issue sent -> the waiter's LeaseGranted at a NATS subscriber.

Starts a throwaway ``nats-server`` and ``eventcoord serve --nats <it>`` on a fresh data folder
(SQLite; ``--db`` for PostgreSQL), has one session claim an issue and ``--waiters`` sessions
join its line (``wait: true``), then walks the line: the holder releases, the subscriber
(``eventcoord.client.subscribe``, types LeaseGranted) receives the next waiter's grant
(``handed_off: true``), that waiter releases, and so on. Latency = grant received - release
sent (one host clock). Prints p50/p90/p99/max over the hand-offs.

    .venv/bin/python bench/handoff_latency.py                       # 100 waiters, SQLite
    .venv/bin/python bench/handoff_latency.py --db postgresql+asyncpg://postgres@127.0.0.1:5432/DB
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import msgspec

from eventcoord.client.subscriber import subscribe
from eventcoord.codec import WireEvent
from eventcoord.outbox.broker import throwaway_broker

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--waiters", type=int, default=100)
    p.add_argument("--db", default=None)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ec-handoff-bench-"))
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
        env = {**os.environ, "EVENTCOORD_BOOTSTRAP_TOKEN": TOKEN}
        server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(
                base_url=base, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30
            ) as http:
                for _ in range(100):
                    try:
                        if (await http.get("/health")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.1)

                async def post(body: dict[str, object]) -> httpx.Response:
                    return await http.post("/v1/commands", json=body)

                await post({"type": "configure_project", "project": "B", "wip_limit": 1000})
                sids = [
                    (await post({"type": "register_agent", "actor": f"w{i}"})).json()["result"]["session_id"]
                    for i in range(args.waiters + 1)
                ]
                assert (
                    await post({"type": "claim_issue", "session_id": sids[0], "project": "B", "issue": "HOT"})
                ).status_code == 200
                for sid in sids[1:]:
                    r = await post(
                        {"type": "claim_issue", "session_id": sid, "project": "B", "issue": "HOT", "wait": True}
                    )
                    assert r.json()["error"]["details"]["waiting"]["place"] >= 1
                start_after = (await http.get("/health")).json()["head"]
                grants: asyncio.Queue[tuple[float, WireEvent]] = asyncio.Queue()

                async def listen() -> None:
                    async for ev in subscribe(
                        broker.url, workspace="default", types=["LeaseGranted"], after=start_after
                    ):
                        await grants.put((time.perf_counter(), ev))

                listener = asyncio.create_task(listen())
                await asyncio.sleep(1.0)
                latencies: list[float] = []
                for holder, nxt in itertools.pairwise(sids):
                    sent = time.perf_counter()
                    r = await post({"type": "release_issue", "session_id": holder, "issue": "HOT"})
                    assert r.json()["result"]["handed_off_to"] == nxt, r.text
                    received, ev = await asyncio.wait_for(grants.get(), 30)
                    data = msgspec.json.decode(ev.data)
                    assert data["session_id"] == nxt and data["handed_off"] is True
                    latencies.append((received - sent) * 1000)
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener
            q = statistics.quantiles(latencies, n=100)
            print(f"backend={'postgresql' if args.db else 'sqlite'} waiters={args.waiters} hand-offs={len(latencies)}")
            print(
                f"release sent -> grant at NATS subscriber: p50 {q[49]:.2f} ms  p90 {q[89]:.2f} ms  p99 {q[98]:.2f} "
                f"ms  max {max(latencies):.2f} ms"
            )
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
