"""Relay latency: command accepted -> event received by a JetStream subscriber.

Appends single-event commands at ``--rate`` per second for ``--seconds`` against a real
store (SQLite in a temp dir, or a fresh PostgreSQL database with ``--db``) and a real
``nats-server``; the relay publishes them and a subscriber (``eventcoord.client.subscribe``, in
this process) receives them. "Accepted" is the moment ``store.append`` returned (the
commit), right before the command pipeline would call ``relay.notify()``. Prints p50/p90/
p99/max per relay window size (and, first, the relay's catch-up throughput on a backlog); \
``--window 1`` publishes one message and awaits its PubAck
before the next, larger windows pipeline publishes and take the acks in order.

    .venv/bin/python bench/relay_latency.py                          # SQLite, windows 1 and 256
    .venv/bin/python bench/relay_latency.py --rate 2000 --window 64
    .venv/bin/python bench/relay_latency.py --db postgresql+asyncpg://postgres@127.0.0.1:5432

Later the append will go through HTTP (``POST /v1/commands``); today it calls the store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from eventcoord.client.subscriber import subscribe
from eventcoord.events import AgentHeartbeat
from eventcoord.outbox.broker import throwaway_broker
from eventcoord.outbox.relay import Relay
from eventcoord.store import open_store
from eventcoord.store.base import EventStore


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def fresh_store(db: str | None, tmp: str) -> tuple[EventStore, str | None]:
    """A started, migrated store; for PostgreSQL a new database (returned for dropping)."""
    if not db:
        store = open_store(f"sqlite+aiosqlite:///{tmp}/bench.db")
        await store.start()
        await store.migrate()
        return store, None
    import asyncpg

    name = f"ec_bench_{uuid.uuid4().hex[:10]}"
    base = db.rstrip("/")
    conn = await asyncpg.connect(base.replace("postgresql+asyncpg://", "postgresql://") + "/postgres")
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    store = open_store(f"{base}/{name}")
    await store.start()
    await store.migrate()
    return store, name


async def drop_database(db: str, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(db.rstrip("/").replace("postgresql+asyncpg://", "postgresql://") + "/postgres")
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


async def run(rate: float, seconds: float, window: int, db: str | None, warmup: int) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="eventcoord-bench-")
    store, dbname = await fresh_store(db, tmp)
    accepted: dict[int, float] = {}
    received: dict[int, float] = {}
    command_ms: list[float] = []
    try:
        async with throwaway_broker() as broker:
            relay = Relay(store, broker.url, instance_id="bench", window=window)
            await relay.start()
            total = warmup + int(rate * seconds)
            # The subscriber is another process, as consumers are: its decoding must not
            # steal this process's event loop (or GIL) from the commands and the relay.
            # CLOCK_MONOTONIC is system-wide, so both processes' timestamps compare.
            child = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--subscriber", broker.url, str(total), stdout=asyncio.subprocess.PIPE
            )
            assert child.stdout is not None
            await child.stdout.readline()  # "ready": subscribed

            async def command(i: int) -> None:
                t0 = time.monotonic()
                recorded = await store.append(
                    "bench", f"session:{i % 512}", None, [AgentHeartbeat(session_id=f"s{i % 512}")]
                )
                t1 = time.monotonic()
                relay.notify()
                accepted[recorded[0].position] = t1
                if i >= warmup:
                    command_ms.append((t1 - t0) * 1000)

            # Open loop: commands are issued on schedule whether or not earlier ones returned.
            tasks: list[asyncio.Task[None]] = []
            start = time.perf_counter()
            for i in range(total):
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(command(i)))
            await asyncio.gather(*tasks)
            issued_s = time.perf_counter() - start
            try:
                async with asyncio.timeout(60):
                    out, _ = await child.communicate()
                received.update({int(k): v for k, v in json.loads(out).items()})
            finally:
                if child.returncode is None:
                    child.kill()
                status = relay.status()
                await relay.stop()
    finally:
        await store.close()
        if db and dbname:
            await drop_database(db, dbname)
        shutil.rmtree(tmp, ignore_errors=True)

    measured = sorted(accepted)[warmup:]
    latency = [(received[p] - accepted[p]) * 1000 for p in measured if p in received]
    return {
        "backend": "postgresql" if db else "sqlite",
        "window": window,
        "target_rate": rate,
        "achieved_rate": round(total / issued_s, 1),
        "events": len(latency),
        "missing": len(measured) - len(latency),
        "relay_published": relay.published,
        "relay_status": status["state"],
        "latency_ms": {
            "p50": round(pct(latency, 50), 2),
            "p90": round(pct(latency, 90), 2),
            "p99": round(pct(latency, 99), 2),
            "max": round(max(latency), 2),
            "mean": round(statistics.fmean(latency), 2),
        },
        "command_ms": {"p50": round(pct(command_ms, 50), 2), "p99": round(pct(command_ms, 99), 2)},
    }


async def catch_up(backlog: int, window: int, db: str | None) -> dict[str, Any]:
    """Relay throughput: how fast a fresh relay publishes a backlog of ``backlog`` events."""
    tmp = tempfile.mkdtemp(prefix="eventcoord-bench-")
    store, dbname = await fresh_store(db, tmp)
    try:
        for i in range(0, backlog, 100):
            n = min(100, backlog - i)
            await store.append("bench", f"session:{i}", None, [AgentHeartbeat(session_id=f"s{i}")] * n)
        async with throwaway_broker() as broker:
            relay = Relay(store, broker.url, instance_id="bench", window=window)
            start = time.perf_counter()
            await relay.start()
            while relay.status()["checkpoint"] < backlog:
                await asyncio.sleep(0.005)
            elapsed = time.perf_counter() - start
            await relay.stop()
    finally:
        await store.close()
        if db and dbname:
            await drop_database(db, dbname)
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "window": window,
        "backlog": backlog,
        "seconds": round(elapsed, 3),
        "events_per_s": round(backlog / elapsed),
    }


async def subscriber(url: str, total: int) -> None:
    """Child process: receive ``total`` events, then print {position: monotonic time}."""
    received: dict[int, float] = {}
    print("ready", flush=True)  # subscribe() finds the stream (or waits for it) right away
    async for ev in subscribe(url):
        received[ev.position] = time.monotonic()
        if len(received) >= total:
            break
    print(json.dumps(received), flush=True)


async def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--subscriber":
        await subscriber(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=1000.0, help="appends per second (default 1000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured duration (default 10)")
    parser.add_argument("--window", type=int, nargs="+", default=[1, 256], help="relay window sizes to compare")
    parser.add_argument("--warmup", type=int, default=300, help="appends before measuring (default 300)")
    parser.add_argument(
        "--db", default=None, help="postgresql+asyncpg://user@host:port (default: SQLite in a temp dir)"
    )
    parser.add_argument("--backlog", type=int, default=20_000, help="events for the catch-up throughput run (0: skip)")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    for window in args.window if args.backlog else []:
        t = await catch_up(args.backlog, window, args.db)
        results.append(t)
        print(
            f"catch-up   window={window:<4} {t['backlog']} events in {t['seconds']:.2f}s "
            f"= {t['events_per_s']}/s published",
            flush=True,
        )
    for window in args.window:
        r = await run(args.rate, args.seconds, window, args.db, args.warmup)
        results.append(r)
        lat, cmd = r["latency_ms"], r["command_ms"]
        print(
            f"{r['backend']:<10} window={window:<4} rate={r['achieved_rate']:>7}/s events={r['events']:<6} "
            f"missing={r['missing']}  accepted->received ms: p50 {lat['p50']:.2f}  p90 {lat['p90']:.2f}  "
            f"p99 {lat['p99']:.2f}  max {lat['max']:.2f}   command ms: p50 {cmd['p50']:.2f}  p99 {cmd['p99']:.2f}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    asyncio.run(main())
