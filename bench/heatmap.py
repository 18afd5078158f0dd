"""The contention heatmap over a million conflicts: one-week window, SQLite and PostgreSQL.

Loads ``--rows`` conflict rows (default 1,000,000) straight into the ``conflicts`` read
model of a fresh SQLite file and of a fresh PostgreSQL database (created, then dropped),
spread evenly over ``--days`` (default 365) with a skewed choice among ~2,000 paths, plus
a tenth as many rows of another workspace. Then times the one-week window through
``heatmap_buckets`` — the function ``GET /v1/heatmap`` calls — via ``store.query`` as the
route does, and prints median and p95 milliseconds per query shape.

    .venv/bin/python bench/heatmap.py
    .venv/bin/python bench/heatmap.py --rows 200000 --pg-url none       # SQLite only
    .venv/bin/python bench/heatmap.py --pg-url postgresql+asyncpg://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eventcoord.api.queries.files import HeatmapMode, heatmap_buckets
from eventcoord.store import open_store

DAY_US = 86_400 * 1_000_000
WEEK_US = 7 * DAY_US
WORKSPACE = "default"
COLUMNS = (
    "position",
    "workspace",
    "path",
    "issue",
    "session_id",
    "holder_path",
    "holder_issue",
    "holder_session_id",
    "forced",
    "occurred_us",
)


def repo_paths(rng: random.Random) -> list[str]:
    """About 2,000 plausible paths of a monorepo: files, directory claims and globs."""
    tops = ["src", "lib", "docs", "tests", "tools", "web", "api", "infra", "scripts", "vendor"]
    out: list[str] = []
    for top in tops:
        for sub in range(20):
            for f in range(9):
                out.append(f"{top}/mod{sub}/file{f}.py")
            out.append(f"{top}/mod{sub}/")
        out.append(f"{top}/**/*.py")
    return out


def rows(
    n: int, workspace: str, start_us: int, span_us: int, first_position: int, seed: int
) -> Iterator[tuple[Any, ...]]:
    """``n`` conflict rows, evenly spread over the span, paths chosen with a Zipf-like skew."""
    rng = random.Random(seed)
    paths = repo_paths(rng)
    weights = [1 / (i + 1) for i in range(len(paths))]
    rng.shuffle(paths)
    chosen = rng.choices(paths, weights, k=n)
    step = span_us / n
    for i in range(n):
        path = chosen[i]
        yield (
            first_position + i,
            workspace,
            path,
            f"I-{i % 5000}",
            f"s-{i % 300}",
            path,
            f"H-{i % 4000}",
            f"s-{(i + 7) % 300}",
            i % 10 == 0,
            start_us + int(i * step),
        )


def load_sqlite(path: str, n: int, start_us: int, span_us: int) -> None:
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    with con:
        con.executemany(
            f"INSERT INTO conflicts ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
            rows(n, WORKSPACE, start_us, span_us, 1, 1),
        )
        con.executemany(
            f"INSERT INTO conflicts ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
            rows(n // 10, "other", start_us, span_us, n + 1, 2),
        )
    con.execute("ANALYZE")
    con.close()


async def load_postgres(url: str, n: int, start_us: int, span_us: int) -> None:
    import asyncpg

    con = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await con.copy_records_to_table(
            "conflicts", records=rows(n, WORKSPACE, start_us, span_us, 1, 1), columns=COLUMNS
        )
        await con.copy_records_to_table(
            "conflicts", records=rows(n // 10, "other", start_us, span_us, n + 1, 2), columns=COLUMNS
        )
        await con.execute("VACUUM ANALYZE conflicts")
    finally:
        await con.close()


SHAPES: list[tuple[str, dict[str, Any]]] = [
    ("week, depth 1", {"depth": 1}),
    ("week, depth 3", {"depth": 3}),
    ("week, prefix src, depth 2", {"prefix": "src", "depth": 2}),
]


async def time_queries(url: str, start_us: int, span_us: int, runs: int) -> None:
    store = open_store(url)
    await store.start()
    try:
        mode: HeatmapMode = "contention"
        week_start = start_us + span_us // 2  # a week in the middle of the history
        for label, kw in SHAPES:

            def run(conn: Any, kw: dict[str, Any] = kw) -> Any:
                return heatmap_buckets(conn, WORKSPACE, mode, week_start, week_start + WEEK_US, **kw)

            buckets = await store.query(run)  # warm-up, and a sanity check of the answer
            samples = []
            for _ in range(runs):
                t0 = time.perf_counter()
                await store.query(run)
                samples.append((time.perf_counter() - t0) * 1000)
            samples.sort()
            p95 = samples[min(len(samples) - 1, int(len(samples) * 0.95))]
            total = sum(b.count for b in buckets)
            print(
                f"  {label:28s} median {statistics.median(samples):7.2f} ms   p95 {p95:7.2f} ms"
                f"   ({total} conflicts in {len(buckets)} buckets)"
            )
    finally:
        await store.close()


async def migrate(url: str) -> None:
    store = open_store(url)
    await store.start()
    try:
        await store.migrate()
    finally:
        await store.close()


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--days", type=int, default=365)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument(
        "--pg-url",
        default=os.environ.get("EVENTCOORD_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL server URL to create the bench database on, or 'none'",
    )
    args = p.parse_args()
    span_us = args.days * DAY_US
    start_us = time.time_ns() // 1000 - span_us
    print(f"{args.rows:,} conflicts over {args.days} days; one-week window; {args.runs} runs each")

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bench.db")
        url = f"sqlite+aiosqlite:///{path}"
        await migrate(url)
        t0 = time.perf_counter()
        load_sqlite(path, args.rows, start_us, span_us)
        print(f"sqlite (loaded in {time.perf_counter() - t0:.1f} s)")
        await time_queries(url, start_us, span_us, args.runs)

    if args.pg_url.lower() == "none":
        return
    import asyncpg

    admin = args.pg_url.replace("postgresql+asyncpg://", "postgresql://")
    name = f"ec_bench_{uuid.uuid4().hex[:10]}"
    db_url = args.pg_url.rsplit("/", 1)[0] + "/" + name
    con = await asyncpg.connect(admin)
    await con.execute(f'CREATE DATABASE "{name}"')
    try:
        await migrate(db_url)
        t0 = time.perf_counter()
        await load_postgres(db_url, args.rows, start_us, span_us)
        print(f"postgresql (loaded in {time.perf_counter() - t0:.1f} s)")
        await time_queries(db_url, start_us, span_us, args.runs)
    finally:
        await con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await con.close()


if __name__ == "__main__":
    asyncio.run(main())
