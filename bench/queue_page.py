"""The first page of ``GET /v1/queue`` (1,000 items) on a store migrated before 0009, then after.

``0009_queue_order`` adds the indexes the page walks in enqueue order; before it, the
database sorted every item the workspace ever had. Run on a copy of a store filled by an
older revision (``bench/history_reads.py``'s), which this migrates:

    cp /tmp/hist-10m-ended/h.db /tmp/queue.db   # a store at 0008 or before
    .venv/bin/python bench/queue_page.py --db /tmp/queue.db
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from eventcoord.api.queries.queue import list_queue
from eventcoord.store import open_store
from eventcoord.store.base import EventStore


async def page_ms(store: EventStore, workspace: str, samples: int = 7) -> float:
    out = []
    for _ in range(samples):
        s = time.perf_counter()
        await store.query(lambda c: list_queue(c, workspace, None, None, 0, 1000))
        out.append(time.perf_counter() - s)
    return statistics.median(out) * 1000


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--workspace", default="default")
    args = ap.parse_args()
    url = f"sqlite+aiosqlite:///{args.db}"
    store = open_store(url)
    await store.start()
    try:
        before = await page_ms(store, args.workspace)
    finally:
        await store.close()
    store = open_store(url)
    await store.migrate()
    await store.start()
    try:
        after = await page_ms(store, args.workspace)
    finally:
        await store.close()
    print(f"first page of 1,000 items: {before:.1f} ms before 0009, {after:.1f} ms after (p50 of 7)")


if __name__ == "__main__":
    asyncio.run(main())
