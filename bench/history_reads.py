"""History reads on a filled log: a filtered page, ``as_of`` from a snapshot vs. from zero,
rebuild throughput beside the raw speed of reading the same rows.

Fills a SQLite store through the real pipeline (``Service.execute``): ``--sessions`` agents
heartbeating, claiming and releasing issues in concurrent waves until ``--events`` events,
with a snapshot every ``--every`` events (``take_snapshot``, as the background worker does).
Then, on the same process:

* filtered page: ``type=LeaseGranted`` 100 events, from the start and from near the head;
* ``as_of`` ``--back`` events before the head: nearest snapshot + replay (a fresh moment
  each time, no cache) vs. a scratch replayed from position 0;
* rebuild: ``projections.rebuild`` (events/s) vs. reading the same rows raw (rows/s).

    .venv/bin/python bench/history_reads.py --events 100000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from typing import Any

from sqlalchemy import select

from eventcoord import projections
from eventcoord.api.queries.issues import list_leases
from eventcoord.codec import decode_command
from eventcoord.context import Caller
from eventcoord.history.asof import History, gather
from eventcoord.history.logreads import Filters, read_filtered, read_range
from eventcoord.history.scratch import build
from eventcoord.history.worker import take_snapshot
from eventcoord.service import Service
from eventcoord.store import open_store
from eventcoord.store.schema import events

OPERATOR = Caller("default", "admin", operator=True)


def p50(xs: list[float]) -> str:
    return f"p50 {statistics.median(xs) * 1000:.1f} ms (n={len(xs)})"


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--every", type=int, default=10_000)
    ap.add_argument("--back", type=int, default=5_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite+aiosqlite:///{tmp}/h.db")
        await store.start()
        await store.migrate()
        service = Service(store)

        async def send(body: dict[str, Any]) -> Any:
            try:
                return (await service.execute(OPERATOR, decode_command(json.dumps(body).encode()))).result
            except Exception:
                return None

        await send({"type": "configure_project", "project": "P", "wip_limit": 1000})
        sids = [(await send({"type": "register_agent", "actor": f"a{i}"}))["session_id"] for i in range(args.sessions)]
        t0, wave, next_snap = time.perf_counter(), 0, args.every
        while (head := await store.head()) < args.events:
            kind = wave % 10
            bodies = [
                {"type": "claim_issue", "session_id": s, "project": "P", "issue": f"P-{i}"} if kind == 0
                else {"type": "release_issue", "session_id": s, "issue": f"P-{i}"} if kind == 5
                else {"type": "heartbeat_agent", "session_id": s}
                for i, s in enumerate(sids)
            ]  # fmt: skip
            await asyncio.gather(*(send(b) for b in bodies))
            wave += 1
            if head >= next_snap:
                await take_snapshot(store)
                next_snap += args.every
        print(f"filled {head} events in {time.perf_counter() - t0:.0f} s")

        async def timed(fn: Any, n: int = 30) -> list[float]:
            out = []
            for _ in range(n):
                s = time.perf_counter()
                await fn()
                out.append(time.perf_counter() - s)
            return out

        f = Filters(types=("LeaseGranted",))
        print(
            "filtered page from the start:",
            p50(await timed(lambda: store.query(lambda c: read_filtered(c, 0, 100, "default", f)))),
        )
        print(
            "filtered page near the head:",
            p50(await timed(lambda: store.query(lambda c: read_filtered(c, head - 20_000, 100, "default", f)))),
        )

        history = History(store)
        positions = iter(range(head - args.back, 0, -1))

        async def as_of_snapshot() -> None:
            history.close()
            await history.read("default", str(next(positions)), lambda c: list_leases(c, "default", None, None))

        print(f"as_of {args.back} back (nearest snapshot + replay):", p50(await timed(as_of_snapshot, 20)))

        async def from_zero() -> None:
            p = head - args.back
            evs = await store.query(lambda c: read_range(c, 0, p, "default"))
            chunks, _, ttl = await store.query(lambda c: gather(c, "default", 0))
            s = await asyncio.to_thread(build, p, None, ttl, "default", chunks, evs)
            s.close()

        print(f"as_of {args.back} back (replay from zero):", p50(await timed(from_zero, 3)))

        s = time.perf_counter()
        rows = await store.query(lambda c: len(c.execute(select(events)).all()))
        raw = time.perf_counter() - s
        s = time.perf_counter()
        applied = await store.transact(projections.rebuild, retry=False)
        rb = time.perf_counter() - s
        print(
            f"raw read: {rows / raw:,.0f} rows/s; rebuild: {applied / rb:,.0f} events/s "
            f"({applied} events in {rb:.1f} s)"
        )
        history.close()
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
