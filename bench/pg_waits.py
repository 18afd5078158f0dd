"""What PostgreSQL's backends of a benchmark are doing, sampled: where a batch's time goes.

Samples ``pg_stat_activity`` every ``--every`` ms for ``--seconds`` s and prints, per
(state, wait event, statement), how many backends were in it per sample on average. A
writer's transaction shows as ``active`` while PostgreSQL runs a statement, ``Lock`` while
it waits for a row another transaction holds (the log's counter), ``IO WALSync`` while a
COMMIT flushes, and ``idle in transaction`` / ``ClientRead`` while PostgreSQL waits for the
server's next statement. Run it beside a benchmark, e.g.:

    .venv/bin/python bench/commands.py --only postgresql --db postgresql+asyncpg://postgres@127.0.0.1:5432 \\
        --commands --replica-commands heartbeat_agent --duration 20 --quiet-wait 0 &
    sleep 8; .venv/bin/python bench/pg_waits.py --seconds 12
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import time

import asyncpg

_SAMPLE = """SELECT state, wait_event_type, wait_event, left(query, 40) AS q FROM pg_stat_activity
WHERE datname LIKE $1 AND pid <> pg_backend_pid()"""


async def sample(url: str, like: str, seconds: float, every_ms: float) -> None:
    """Sample for ``seconds`` and print the average backends per state."""
    conn = await asyncpg.connect(url)
    counts: collections.Counter[tuple[str, str, str, str]] = collections.Counter()
    samples = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            rows = await conn.fetch(_SAMPLE, like)
            if rows:
                samples += 1
                for r in rows:
                    query = r["q"] if r["state"] == "active" else ""
                    counts[(r["state"] or "", r["wait_event_type"] or "", r["wait_event"] or "", query)] += 1
            await asyncio.sleep(every_ms / 1000)
    finally:
        await conn.close()
    print(f"{samples} samples of the databases like {like!r}; backends per sample:")
    for (state, kind, event, query), n in counts.most_common(20):
        print(f"  {n / max(samples, 1):6.2f}  {state:<20} {kind + ' ' + event:<24} {query}")


def main() -> None:
    """Parse the options and sample."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/postgres", help="where to read the view")
    p.add_argument("--like", default="eventcoord_bench%", help="the benchmark's databases (default the bench's own)")
    p.add_argument("--seconds", type=float, default=12)
    p.add_argument("--every", type=float, default=5, help="milliseconds between samples (default 5)")
    args = p.parse_args()
    asyncio.run(sample(args.url, args.like, args.seconds, args.every))


if __name__ == "__main__":
    main()
