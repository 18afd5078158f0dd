"""What a snapshot costs the snapshot worker, on a filled store (``bench/history_reads.py``'s).

Takes ``--count`` snapshots ``--every`` events apart, twice, at positions after the store's
newest snapshot: first one-off (``take_snapshot``: load the nearest stored snapshot's live
rows into a scratch, replay the events since, dump every live row; what the worker did
before ``Snapshotter``), then with one ``Snapshotter`` (its first snapshot is built the
same way, every later one on the kept scratch: the events since replayed, only the chunks
of the rows they changed cut again). Prints wall and CPU seconds (all threads) per
snapshot and per event. It writes snapshots: run it on a copy of the store.

    cp /tmp/hist-10m-ended/h.db /tmp/snapcost.db
    .venv/bin/python bench/snapshot_cost.py --db /tmp/snapcost.db --every 10000 --count 4

On a revision without ``Snapshotter`` only the one-off series runs (the before of an A/B).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from sqlalchemy import func, select

from eventcoord.history import snapshots, worker
from eventcoord.store import open_store
from eventcoord.store.schema import snapshot_chunks
from eventcoord.store.schema import snapshots as snapshots_t


def _cost() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


async def series(take: Any, positions: list[int]) -> list[tuple[float, float]]:
    out = []
    for p in positions:
        w0, c0 = _cost()
        assert await take(p) == p
        w1, c1 = _cost()
        out.append((w1 - w0, c1 - c0))
        print(f"  snapshot at {p:,}: {w1 - w0:.3f} s wall, {c1 - c0:.3f} s CPU", flush=True)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="a SQLite store file (it gets snapshots written)")
    ap.add_argument("--every", type=int, default=10_000)
    ap.add_argument("--count", type=int, default=4)
    args = ap.parse_args()
    store = open_store(f"sqlite+aiosqlite:///{args.db}")
    await store.migrate()  # a store filled by an older revision
    await store.start()
    try:
        head = await store.head()
        last = await store.query(snapshots.latest_position)
        start = last + args.every
        one_off = [start + i * args.every for i in range(args.count)]
        kept = [one_off[-1] + (i + 1) * args.every for i in range(args.count + 1)]
        assert kept[-1] <= head, f"the log ends at {head:,}: fewer snapshots or a smaller --every"
        out: dict[str, Any] = {"head": head, "every": args.every}
        print(f"one-off snapshots (take_snapshot), {args.every:,} events apart:", flush=True)
        costs = await series(lambda p: worker.take_snapshot(store, p), one_off)
        out["one-off cpu s"] = statistics.median(c for _, c in costs)
        out["one-off wall s"] = statistics.median(w for w, _ in costs)

        def stored(c: Any) -> tuple[int, int]:
            rows = select(
                func.sum(func.length(snapshots_t.c.manifest) + func.coalesce(func.length(snapshots_t.c.history), 0))
            )
            chunks = select(func.sum(func.length(snapshot_chunks.c.data)))
            return int(c.execute(rows).scalar_one() or 0), int(c.execute(chunks).scalar_one() or 0)

        if hasattr(worker, "Snapshotter"):
            print("one Snapshotter (the first builds afresh, the rest on the kept scratch):", flush=True)
            snapshotter = worker.Snapshotter(store)
            try:
                costs = await series(snapshotter.take, kept[:1])
                before = await store.query(stored)
                costs += await series(snapshotter.take, kept[1:])
                after = await store.query(stored)
            finally:
                snapshotter.close()
            # What the kept snapshots added to the store, per event of the log they cover.
            span = kept[-1] - kept[0]
            out["kept bytes/event: snapshot rows"] = round((after[0] - before[0]) / span, 1)
            out["kept bytes/event: new chunks"] = round((after[1] - before[1]) / span, 1)
            out["kept first cpu s"] = costs[0][1]
            out["kept cpu s"] = statistics.median(c for _, c in costs[1:])
            out["kept wall s"] = statistics.median(w for w, _ in costs[1:])
        for k in [k for k in out if k.endswith("cpu s")]:
            out[k.replace("cpu s", "cpu µs/event")] = round(out[k] / args.every * 1e6, 1)
        print(json.dumps(out))
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
