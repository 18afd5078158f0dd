"""A pull and its finish, timed in process on a fresh SQLite store: p50 and mean per pair.

For a quick before/after of the queue's decision path without HTTP and wrk (whose server
CPU per request is noisy on a 2-core machine): one agent pulls and finishes ``--pairs``
items of a queue filled beforehand, through ``Service.execute``. Run it from another
tree's ``git archive`` with ``PYTHONPATH`` for that tree's code (docs/performance.md).

    .venv/bin/python bench/queue_pairs.py --pairs 1500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from typing import Any


async def pairs(count: int) -> list[float]:
    """µs per claim_next_work + finish_work pair, ``count`` pairs."""
    from eventcoord.codec import decode_command
    from eventcoord.context import Caller
    from eventcoord.service import Service
    from eventcoord.store import open_store

    with tempfile.TemporaryDirectory(prefix="eventcoord-queue-pairs-") as folder:
        store = open_store(f"sqlite+aiosqlite:///{folder}/queue.db")
        await store.start()
        await store.migrate()
        service, caller = Service(store), Caller("default", "admin", operator=True)

        async def send(body: dict[str, Any]) -> dict[str, Any]:
            outcome = await service.execute(caller, decode_command(json.dumps(body).encode()))
            if outcome.refusal is not None:
                raise RuntimeError(f"{body['type']} refused: {outcome.refusal}")
            result: dict[str, Any] = outcome.result or {}
            return result

        sid = (await send({"type": "register_agent", "actor": "bench", "host": "bench"}))["session_id"]
        for _ in range(count):
            await send({"type": "enqueue_work", "project": "Q"})
        took: list[float] = []
        for _ in range(count):
            start = time.perf_counter()
            item = (await send({"type": "claim_next_work", "session_id": sid, "project": "Q"}))["item"]["item_id"]
            await send({"type": "finish_work", "session_id": sid, "item_id": item, "outcome": "cancelled"})
            took.append((time.perf_counter() - start) * 1e6)
        await store.close()
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1500, help="pulls and finishes timed (default 1,500)")
    args = parser.parse_args()
    took = asyncio.run(pairs(args.pairs))
    print(f"claim_next_work + finish_work: p50 {statistics.median(took):,.0f} us  mean {statistics.mean(took):,.0f} us")


if __name__ == "__main__":
    main()
