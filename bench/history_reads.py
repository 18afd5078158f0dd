"""History reads on a filled log: filtered pages, ``as_of`` from a snapshot vs. from zero,
rebuild throughput beside the raw speed of reading the same rows; SQLite and PostgreSQL.

Fills a SQLite store through the real pipeline, in process (``bench/history_fill.py``: a
fleet of ``--agents`` agents heartbeating, claiming and releasing issues and files, refused
claims, queue traffic, messages, session churn; ``Service.execute`` with every agent's
command in flight at once, so the group commit batches them), with a snapshot every
``--every`` events taken by the snapshot worker's own ``take_snapshot``. ``--work DIR``
keeps the store; ``--reuse`` measures it again without refilling. ``--pg URL`` also copies
every row of that store (log, read models, snapshots) into a fresh PostgreSQL database
(``COPY``) and measures the same there; the database is dropped at the end.

Then, per backend, in one process:

* filtered pages of 100 (``/v1/events``' own ``logreads.page``): by type, by stream, by a
  ``since``/``until`` window, each from the start and near the head;
* ``as_of`` ``--back`` events before the head (``History.read`` of the leases, as
  ``/v1/leases?as_of=`` runs it; a fresh moment each time, no cache) vs. a scratch replayed
  from position 0 (``--zero-samples``);
* rebuild: ``projections.rebuild`` (events/s) vs. reading the same rows raw (rows/s).

    .venv/bin/python bench/history_reads.py --events 1000000 --work /tmp/hist-1m --pg postgresql+asyncpg://postgres@127.0.0.1:5432
    .venv/bin/python bench/history_reads.py --events 10000000 --work /tmp/hist-10m --skip rebuild
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parent))

from history_fill import derive, fill, grow
from history_pg import copy_into_postgres, fresh_database

from eventcoord import projections
from eventcoord.api.queries.files import LIVE_CLAIMS_TABLES, heatmap_buckets, live_claims
from eventcoord.api.queries.issues import ISSUE_STATE_TABLES, LIST_LEASES_TABLES, about_issue, issue_state, list_leases
from eventcoord.api.queries.queue import LIST_QUEUE_TABLES, list_queue
from eventcoord.api.queries.sessions import LIST_AGENTS_TABLES, list_agents
from eventcoord.context import Caller
from eventcoord.history import snapshots
from eventcoord.history.asof import History, gather
from eventcoord.history.logreads import Filters, page, read_range
from eventcoord.history.scratch import Scratch, build, plan
from eventcoord.history.snapshots import decode_chunk
from eventcoord.history.worker import Snapshotter, take_snapshot
from eventcoord.projections.tables import leases
from eventcoord.store import open_store
from eventcoord.store.base import EventStore
from eventcoord.store.schema import events

WS = "default"


def ms(xs: list[float]) -> str:
    lo, hi = min(xs) * 1000, max(xs) * 1000
    return f"p50 {statistics.median(xs) * 1000:,.1f} ms (min {lo:,.1f}, max {hi:,.1f}, n={len(xs)})"


async def timed(fn: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    out = []
    for _ in range(n):
        s = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - s)
    return out


async def pages(store: EventStore, head: int, n: int, out: dict[str, Any]) -> None:
    """Filtered pages of 100 from the start and near the head."""
    near = head - 20_000

    def event_at(p: int) -> Any:
        return store.query(
            lambda c: c.execute(select(events.c.stream, events.c.recorded_us).where(events.c.position == p)).one()
        )

    stream_near, t_near = await event_at(near)
    stream_start, t_start = await event_at(100)
    cases = {
        "type=LeaseGranted": (Filters(types=("LeaseGranted",)), 0, near),
        "type=ClaimConflict": (Filters(types=("ClaimConflict",)), 0, near),
        "stream (a session's)": (Filters(stream=stream_start), 0, None),
        "stream (near the head)": (Filters(stream=stream_near), None, near - 1),
        "since/until (one minute)": (Filters(since_us=t_start, until_us=t_start + 60_000_000), 0, None),
        "since/until near the head": (Filters(since_us=t_near, until_us=t_near + 60_000_000), None, near),
    }
    for name, (f, start, head_after) in cases.items():
        for where, after in (("start", start), ("head", head_after)):
            if after is None:
                continue
            got = await store.query(lambda c, f=f, after=after: page(c, after, 100, WS, f))
            xs = await timed(lambda f=f, after=after: store.query(lambda c: page(c, after, 100, WS, f)), n)
            out[f"page {name} from {where}"] = statistics.median(xs)
            print(f"  page {name}, from {where} (after={after}, {len(got)} rows): {ms(xs)}", flush=True)


#: The point-in-time reads measured: (name, read, history rows needed, tables loaded), as
#: their routes ask; ``ALL`` (every table) is how every read was answered before.
ALL = None
#: Answered from the live tables up to the position (``History.read_upto``), as the route does.
UPTO = "upto"
#: A read about one issue: its rows rebuilt from its stream (``History.read_about``), as the route does.
ABOUT = "about"
READS: list[tuple[str, Callable[[Any], Any], bool, Any]] = [
    ("leases (/v1/leases)", lambda c: list_leases(c, WS, None, None), False, LIST_LEASES_TABLES),
    ("agents (/v1/agents)", lambda c: list_agents(c, WS, None, 1000), True, LIST_AGENTS_TABLES),
    ("file claims (/v1/file-claims)", lambda c: live_claims(c, WS, None, None, "", 1000), False, LIVE_CLAIMS_TABLES),
    ("issue state (/v1/issues/I/state)", None, False, ABOUT),
    ("issue state, scratch of every issue", None, False, ISSUE_STATE_TABLES),
    ("leases, every table's live rows", lambda c: list_leases(c, WS, None, None), False, ALL),
    ("leases, whole snapshot loaded", lambda c: list_leases(c, WS, None, None), True, ALL),
    (
        "contention heatmap (/v1/heatmap)",
        lambda c, p=None: heatmap_buckets(c, WS, "contention", None, None, "", 2, None, p),
        True,
        UPTO,
    ),
    (
        "claims heatmap (/v1/heatmap)",
        lambda c, p=None: heatmap_buckets(c, WS, "claims", None, None, "", 2, None, p),
        True,
        UPTO,
    ),
    ("queue (/v1/queue)", lambda c, p=None: list_queue(c, WS, None, None, 0, 1000, p), True, UPTO),
    (
        "queue, scratch with its whole history",
        lambda c: list_queue(c, WS, None, None, 0, 1000),
        True,
        LIST_QUEUE_TABLES,
    ),
]


async def as_of(
    store: EventStore, head: int, back: int, samples: int, history_samples: int, zero: int, out: dict[str, Any]
) -> None:
    """``as_of`` ``back`` events before the head: nearest snapshot + replay, and from zero."""
    history = History(store)
    # Distinct moments spread over a snapshot interval (0 … every events past a snapshot).
    moments = [head - back - k * 1_733 for k in range(samples)]
    snaps = [await store.query(lambda c, p=p: snapshots.nearest(c, p)) for p in moments]
    replayed = [p - (s.position if s else 0) for p, s in zip(moments, snaps, strict=True)]
    print(
        f"  as_of {back:,} back: moments {moments[0]:,} … {moments[-1]:,}, "
        f"events replayed after the snapshot {replayed}"
    )
    # An issue that was held then (the issue-state read asks for one issue).
    held = await store.query(lambda c: c.execute(select(leases.c.issue).where(leases.c.workspace == WS)).scalar())
    who = Caller(WS, "admin")
    for name, fn, hist, tables in READS:
        if fn is None:
            fn = lambda c: issue_state(c, who, held, None)  # noqa: E731
        totals = []
        # The reads that load every table's history, or the queue's, take seconds: fewer samples.
        heavy = hist and (tables is ALL or tables is LIST_QUEUE_TABLES)
        for p in moments[:history_samples] if heavy else moments:
            history.close()  # a fresh moment each time: no cached scratch
            s = time.perf_counter()
            if tables == UPTO:
                await history.read_upto(WS, str(p), fn)
            elif tables == ABOUT:
                await history.read_about(WS, str(p), fn, **about_issue(held))
            else:
                await history.read(WS, str(p), fn, history=hist, tables=tables)
            totals.append(time.perf_counter() - s)
        out[f"as_of {name}"] = statistics.median(totals)
        # Beside it, the same read of the live read models (no as_of): what the answer itself costs.
        live = await timed(lambda fn=fn: store.query(fn), 5)
        print(f"  as_of {back:,} back, {name}: {ms(totals)}; the live read: {ms(live)}", flush=True)
    # Where the time goes, for the leases read: what History.scratch does, in its parts.
    parts: dict[str, list[float]] = {"gather": [], "build": [], "read": []}
    _, load = plan([str(t.name) for t in LIST_LEASES_TABLES])
    for p in moments:
        s = time.perf_counter()
        chunks, evs, ttl = await store.query(lambda c, p=p: gather(c, WS, p, history=False, tables=load))
        parts["gather"].append(time.perf_counter() - s)
        s = time.perf_counter()
        scratch = await asyncio.to_thread(build, p, None, ttl, WS, chunks, evs, load)
        parts["build"].append(time.perf_counter() - s)
        s = time.perf_counter()
        await asyncio.to_thread(scratch.read, READS[0][1])
        parts["read"].append(time.perf_counter() - s)
        scratch.close()
    rows = sum(len(decode_chunk(d)) for ds in chunks.values() for d in ds)
    print(
        "    leases, parts: "
        + ", ".join(f"{k} {statistics.median(v) * 1000:,.1f} ms" for k, v in parts.items())
        + f" ({rows:,} snapshot rows loaded, {len(evs):,} events replayed, last sample)"
    )
    out["as_of parts"] = {k: statistics.median(v) for k, v in parts.items()}
    history.close()

    async def from_zero() -> None:
        # The events are read and replayed in pages: ten million decoded events do not fit.
        p = head - back
        _, _, ttl = await store.query(lambda c: gather(c, WS, 0))
        scratch = Scratch(p, None, ttl, WS)
        after = 0
        while after < p:
            evs = await store.query(lambda c, a=after: read_range(c, a, min(a + 50_000, p), WS))
            await asyncio.to_thread(scratch.replay, evs)
            after = min(after + 50_000, p)
        await asyncio.to_thread(scratch.read, lambda c: list_leases(c, WS, None, None))
        scratch.close()

    if zero:
        xs = await timed(from_zero, zero)
        out["from zero p50"] = statistics.median(xs)
        print(f"  as_of {back:,} back, replay from position 0: {ms(xs)}", flush=True)


async def worker_snapshot(store: EventStore, every: int, out: dict[str, Any]) -> None:
    """What one snapshot costs the background worker, ``every`` events after the newest one.

    Beside it, the same snapshot built the way before the history split (the previous
    snapshot loaded whole, every row dumped again; not stored).
    """
    last = await store.query(snapshots.latest_position)
    at = min(last + every, await store.head())

    def cost() -> tuple[float, float]:
        return time.perf_counter(), sum(os.times()[:2])

    w0, c0 = cost()
    chunks, evs, ttl = await store.query(lambda c: gather(c, None, at, history=True))
    scratch = await asyncio.to_thread(lambda: build(at, None, ttl, None, chunks, evs, counting=True))
    await asyncio.to_thread(scratch.read, snapshots.dump)
    scratch.close()
    w1, c1 = cost()
    await take_snapshot(store, at)
    w2, c2 = cost()
    out["snapshot s"], out["snapshot cpu s"], out["snapshot whole s"] = w2 - w1, c2 - c1, w1 - w0
    print(
        f"  worker snapshot at {at:,} ({at - last:,} events after the previous): "
        f"{w2 - w1:.1f} s ({c2 - c1:.1f} s CPU); "
        f"the previous snapshot loaded whole and dumped again: {w1 - w0:.1f} s ({c1 - c0:.1f} s CPU)",
        flush=True,
    )


async def rebuild(store: EventStore, out: dict[str, Any]) -> None:
    """Rebuild (decode + every projection) beside a raw read of every ``events`` row."""
    s = time.perf_counter()
    rows = await store.query(lambda c: sum(1 for _ in c.execute(select(events)).yield_per(10_000)))
    raw = time.perf_counter() - s
    s = time.perf_counter()
    applied = await store.transact(projections.rebuild, retry=False)
    rb = time.perf_counter() - s
    out["raw rows/s"], out["rebuild events/s"] = rows / raw, applied / rb
    print(f"  raw read: {rows / raw:,.0f} rows/s ({rows:,} rows in {raw:.1f} s)")
    print(f"  rebuild: {applied / rb:,.0f} events/s ({applied:,} events in {rb:.1f} s)", flush=True)


async def measure(url: str, label: str, args: argparse.Namespace) -> dict[str, Any]:
    store = open_store(url)
    await store.start()
    out: dict[str, Any] = {}
    try:
        head = await store.head()
        n_snaps = await store.query(lambda c: c.execute(select(func.count()).select_from(snapshots.snapshots)).scalar())
        print(f"{label}: {head:,} events, {n_snaps} snapshots", flush=True)
        if "pages" not in args.skip:
            await pages(store, head, args.page_samples, out)
        if "asof" not in args.skip:
            await as_of(store, head, args.back, args.samples, args.history_samples, args.zero_samples, out)
        if "snapshot" not in args.skip:
            await worker_snapshot(store, args.every, out)
        if "rebuild" not in args.skip:
            await rebuild(store, out)
    finally:
        await store.close()
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--agents", type=int, default=400, help="agents in flight at once (group commit)")
    ap.add_argument("--cycle", type=int, default=60, help="steps of one agent's task cycle")
    ap.add_argument("--every", type=int, default=10_000, help="snapshot interval of the fill")
    ap.add_argument(
        "--snap-window",
        type=int,
        nargs=2,
        metavar=("LO", "HI"),
        default=None,
        help="snapshot only while the head is in [LO, HI], from the live read models (history_fill.live_snapshot)",
    )
    ap.add_argument("--back", type=int, default=5_000, help="as_of this many events before the head")
    ap.add_argument("--samples", type=int, default=9, help="as_of moments (distinct)")
    ap.add_argument("--history-samples", type=int, default=3, help="as_of moments of the reads that load history")
    ap.add_argument("--zero-samples", type=int, default=1)
    ap.add_argument("--page-samples", type=int, default=30)
    ap.add_argument("--work", type=Path, default=None, help="keep the SQLite store here")
    ap.add_argument("--reuse", action="store_true", help="measure the store in --work again")
    ap.add_argument("--pg", default=None, help="postgresql+asyncpg://user@host:port: measure a copy there too")
    ap.add_argument("--keep-pg", action="store_true", help="keep (and with --reuse, reuse) the PostgreSQL copy")
    ap.add_argument("--skip", nargs="*", default=[], choices=["pages", "asof", "snapshot", "rebuild", "sqlite"])
    ap.add_argument(
        "--grow-from",
        type=Path,
        default=None,
        help="instead of filling: copy this pipeline-filled store and append --copies renamed shifts of it",
    )
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument(
        "--end-sessions",
        action="store_true",
        help="the fill ends every session at the end (a shift that leaves: grown shifts leave no live state behind)",
    )
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--snapshot-at",
        type=int,
        nargs="*",
        default=[],
        metavar="P",
        help="before measuring, store snapshots at these positions (the worker's take_snapshot)",
    )
    args = ap.parse_args()
    work = args.work or Path(f"/tmp/hist-{args.events}")
    work.mkdir(parents=True, exist_ok=True)
    db = work / "h.db"
    url = f"sqlite+aiosqlite:///{db}"
    if args.grow_from is not None and not (args.reuse and db.exists()):
        for f in work.glob("h.db*"):
            f.unlink()
        shutil.copy(args.grow_from, db)
        s = time.perf_counter()
        head = grow(str(db), args.copies)
        print(f"grown to {head:,} events in {time.perf_counter() - s:.0f} s", flush=True)
        lo, hi = args.snap_window or (head - args.back - 20_000, head - args.back + args.every)
        store = open_store(url)
        await store.start()
        try:
            s = time.perf_counter()
            taken = await store.transact(lambda c: derive(c, args.every, (lo, hi)), retry=False)
            print(f"read models rebuilt, {taken} snapshots in [{lo:,}, {hi:,}], in {time.perf_counter() - s:.0f} s")
        finally:
            await store.close()
    elif not (args.reuse and db.exists()):
        for f in work.glob("h.db*"):
            f.unlink()
        store = open_store(url)
        await store.start()
        await store.migrate()
        try:
            print(f"filling {args.events:,} events ({args.agents} agents, cycle {args.cycle})", flush=True)
            got = await fill(
                store,
                args.events,
                agents=args.agents,
                cycle=args.cycle,
                every=args.every,
                window=args.snap_window,
                end_sessions=args.end_sessions,
            )
        finally:
            await store.close()
        print(f"filled: {json.dumps(got)}", flush=True)
    store = open_store(url)
    await store.migrate()  # a store filled by an older revision
    await store.close()
    if args.snapshot_at:
        store = open_store(url)
        await store.start()
        snapshotter = Snapshotter(store)  # as the worker takes them: each on the last
        try:
            for at in sorted(args.snapshot_at):
                s = time.perf_counter()
                await snapshotter.take(at)
                print(f"snapshot at {at:,}: {time.perf_counter() - s:.2f} s", flush=True)
        finally:
            snapshotter.close()
            await store.close()
    results: dict[str, Any] = {}
    if "sqlite" not in args.skip:
        results["sqlite"] = await measure(url, "SQLite", args)
    if args.pg:
        name = "bench_" + "".join(ch if ch.isalnum() else "_" for ch in work.name)
        pg_url, created = await fresh_database(args.pg, name, reuse=args.reuse and args.keep_pg)
        try:
            if created:
                s = time.perf_counter()
                await copy_into_postgres(str(db), pg_url)
                print(f"copied into PostgreSQL {name} in {time.perf_counter() - s:.0f} s", flush=True)
            results["postgresql"] = await measure(pg_url, "PostgreSQL", args)
        finally:
            if not args.keep_pg:
                await fresh_database(args.pg, name, drop=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
