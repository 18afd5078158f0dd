"""Deciding a command costs the same with ten events or ten million: fresh vs. filled store.

Builds two SQLite stores that differ only in history size and measures the same commands
on both:

* fresh: ``--sessions`` agent sessions, ``--cycle`` events each (a few hundred events);
* filled: the same plus enough other sessions to reach ``--events`` events in the log
  (default 10,000,000), of which ``--hot`` are extra heartbeats spread over the measured
  sessions' own streams, so each measured stream is thousands of events long.

Every row comes from real commands: one template session is registered, claims and
releases an issue, and heartbeats, through ``eventcoord serve``; the fill replicates its
rows (``events``, ``stream_heads`` and every read-model table that mentions the session:
sessions, issues, leases, ...) in SQL with random session ids, positions shifted and
times spread over the last 30 days, in big transactions with journalling off. Then:

* HTTP: ``wrk`` heartbeat_agent rotating over the measured sessions, one connection
  (latency) and ``--connections`` connections (requests/s); both servers run side by
  side and the runs alternate fresh/filled, ``--rounds`` times; medians;
* in-process: ``Service.execute`` called directly (no HTTP), alternating stores every
  100 commands, for heartbeat_agent, register_agent, and claim_issue + release_issue:
  end-to-end p50/p99 and the time spent inside the transaction (load state, decide,
  append, read models: the part that would grow if deciding replayed history).

    .venv/bin/python bench/history.py                          # 10 M events, ~6 minutes
    .venv/bin/python bench/history.py --events 1000000 --hot 100000
    .venv/bin/python bench/history.py --work /tmp/h --reuse    # measure again, no refill
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from command_path import (  # the bench folder is not a package: imported by path
    Run,
    baseline_tree,
    fmt_run,
    free_port,
    head,
    post_command,
    run_wrk,
    start_eventcoord,
    wait_quiet,
    write_lua,
)

#: Columns whose values are log positions: replicated rows shift them with the events.
POSITION_COLUMNS = {"position", "lease_id", "enqueued_position"}
#: Tables of the store itself that the fill writes explicitly.
STORE_TABLES = {
    "events",
    "stream_heads",
    "store_head",
    "settings",
    "idempotency",
    "tokens",
    "workspaces",
    "relay_state",
    "alembic_version",
}


def db_path(data_dir: Path) -> Path:
    return data_dir / "eventcoord.db"


def make_template(data_dir: Path, cycle: int) -> str:
    """Start a server on an empty store and play one session's life; the session's id.

    The session registers, claims and releases an issue whose key contains the session id
    (so the copies get distinct issues, leases and issue streams), then heartbeats until
    the log holds ``cycle`` events. Without the issue tier it only heartbeats.
    """
    server = start_eventcoord(data_dir, free_port(), None, None, log=data_dir.parent / f"{data_dir.name}-template.log")
    try:
        sid = post_command(server.base, {"type": "register_agent", "actor": "history-template", "host": "bench"})[
            "result"
        ]["session_id"]
        issue = f"hist-{sid}"
        with contextlib.suppress(RuntimeError):  # no issue tier: heartbeats only
            post_command(server.base, {"type": "claim_issue", "session_id": sid, "project": "hist", "issue": issue})
            post_command(
                server.base, {"type": "release_issue", "session_id": sid, "issue": issue, "reason": "completed"}
            )
        while head(server.base) < cycle:
            post_command(server.base, {"type": "heartbeat_agent", "session_id": sid})
    finally:
        server.stop()
    return str(sid)


def _columns(db: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    return [(r[1], (r[2] or "").upper()) for r in db.execute(f'PRAGMA table_info("{table}")')]


def _replicate_select(table: str, columns: list[tuple[str, str]], source: str, shift: str) -> str:
    """SELECT list copying ``source`` rows for each id in ``ids``: text with the template id
    replaced, position columns shifted by ``shift``, times (``*_us``) moved ``ids.c`` steps
    of ``:step`` microseconds into the past (copy 0, the template, keeps its times)."""
    exprs = []
    for name, decl in columns:
        col = f't."{name}"'
        if name in POSITION_COLUMNS:
            exprs.append(f"{col} + {shift}")
        elif name.endswith("_us") and "INT" in decl:
            exprs.append(f"{col} - ids.c * :step")
        elif any(k in decl for k in ("CHAR", "TEXT", "CLOB")) or decl == "":
            exprs.append(f"replace({col}, :tpl, ids.sid)")
        else:
            exprs.append(col)
    return f"SELECT {', '.join(exprs)} FROM ids CROSS JOIN {source} AS t"


def fill(
    data_dir: Path,
    template_sid: str,
    *,
    sessions: int,
    total_events: int,
    hot: int,
    span_days: int = 30,
    chunk: int = 100_000,
) -> dict[str, Any]:
    """Replicate the template session until the log holds about ``total_events`` events.

    Sessions 0..``sessions``-1 (0 is the template itself) are the measured ones; ``hot``
    extra heartbeats are spread over their streams. Returns sizes and timings.
    """
    t0 = time.monotonic()
    db = sqlite3.connect(db_path(data_dir), isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")  # a fill interrupted half-way is simply redone
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA cache_size=-4000000")
    db.execute("PRAGMA temp_store=MEMORY")
    cycle = db.execute("SELECT count(*) FROM events").fetchone()[0]
    head = db.execute("SELECT position FROM store_head WHERE id = 1").fetchone()[0]
    assert cycle == head, "the template store must hold only the template session"
    per_session_hot = hot // sessions if sessions else 0
    hot = per_session_hot * sessions
    copies = max(sessions, (total_events - hot) // cycle)
    # The history spans ``span_days`` back from now, oldest copies first: as in real life
    # most of it is long-ended sessions, not thousands of live ones.
    step = span_days * 86_400_000_000 // copies
    tpl = {"tpl": template_sid}
    tables = [
        r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    ]
    read_models = []
    for t in tables:
        if t in STORE_TABLES:
            continue
        cols = _columns(db, t)
        text_cols = [n for n, d in cols if any(k in d for k in ("CHAR", "TEXT", "CLOB"))]
        if (
            text_cols
            and db.execute(
                f'SELECT 1 FROM "{t}" WHERE ' + " OR ".join(f'instr("{c}", :tpl)' for c in text_cols) + " LIMIT 1", tpl
            ).fetchone()
        ):
            read_models.append(t)
    db.execute("BEGIN")
    # Random ids, as real sessions have; id 0 is the template's own.
    db.execute("CREATE TEMP TABLE ids (c INTEGER PRIMARY KEY, sid TEXT NOT NULL)")
    db.execute("INSERT INTO ids VALUES (0, :tpl)", tpl)
    db.execute(
        "WITH RECURSIVE n(c) AS (SELECT 1 UNION ALL SELECT c + 1 FROM n WHERE c < :last)"
        " INSERT INTO ids SELECT c, 's-' || lower(hex(randomblob(16))) FROM n",
        {"last": copies - 1},
    )
    for t in ["events", "stream_heads", *read_models]:
        db.execute(f'CREATE TEMP TABLE "tpl_{t}" AS SELECT * FROM main."{t}"')
    db.execute("COMMIT")
    for start in range(1, copies, chunk):
        stop = min(copies - 1, start + chunk - 1)
        bounds = {**tpl, "a": start, "b": stop, "step": step}
        db.execute("BEGIN")
        for t in ["events", "stream_heads", *read_models]:
            cols = _columns(db, t)
            select = _replicate_select(t, cols, f'temp."tpl_{t}"', f"ids.c * {cycle}")
            names = ", ".join(f'"{n}"' for n, _ in cols)
            db.execute(f'INSERT INTO main."{t}" ({names}) {select} WHERE ids.c BETWEEN :a AND :b', bounds)
        db.execute("COMMIT")
        print(f"  fill: {(stop + 1) * cycle:>11,} events, {time.monotonic() - t0:6.0f} s", flush=True)
    position = copies * cycle
    if hot:
        # Extra heartbeats on the measured sessions' own streams (copies of the template's
        # first AgentHeartbeat), continuing the versions of each measured session stream.
        hb = db.execute(
            "SELECT position FROM temp.tpl_events WHERE type = 'AgentHeartbeat' ORDER BY position LIMIT 1"
        ).fetchone()
        assert hb is not None, "the template needs a heartbeat (a longer --cycle)"
        stream_version = db.execute(
            "SELECT version FROM stream_heads WHERE stream = 'session:' || :tpl", tpl
        ).fetchone()[0]
        for c in range(sessions):  # one statement per measured stream
            db.execute("BEGIN")
            db.execute(
                "WITH RECURSIVE n(h) AS (SELECT 1 UNION ALL SELECT h + 1 FROM n WHERE h < :hot)"
                " INSERT INTO main.events (position, workspace, stream, version, type, data, metadata, recorded_us)"
                " SELECT :base + ids.c * :hot + n.h, t.workspace, replace(t.stream, :tpl, ids.sid),"
                " :cycle + n.h, t.type,"
                " replace(t.data, :tpl, ids.sid), replace(t.metadata, :tpl, ids.sid), t.recorded_us"
                " FROM ids CROSS JOIN n CROSS JOIN temp.tpl_events AS t WHERE t.position = :hb AND ids.c = :c",
                {**tpl, "base": position, "hot": per_session_hot, "cycle": stream_version, "hb": hb[0], "c": c},
            )
            db.execute("COMMIT")
        db.execute("BEGIN")
        db.execute(
            "UPDATE main.stream_heads SET version = version + :hot WHERE stream IN (SELECT 'session:' || sid FROM ids "
            "WHERE c < :m)",
            {"hot": per_session_hot, "m": sessions},
        )
        if "sessions" in read_models:
            db.execute(
                "UPDATE main.sessions SET heartbeats = heartbeats + :hot WHERE session_id IN (SELECT sid FROM ids "
                "WHERE c < :m)",
                {"hot": per_session_hot, "m": sessions},
            )
        db.execute("COMMIT")
        position += hot
    db.execute("UPDATE store_head SET position = :p WHERE id = 1", {"p": position})
    measured = [r[0] for r in db.execute("SELECT sid FROM ids WHERE c < :m ORDER BY c", {"m": sessions})]
    events = db.execute("SELECT max(position) FROM events").fetchone()[0]
    longest = db.execute("SELECT max(version) FROM stream_heads").fetchone()[0]
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    return {
        "events": events,
        "sessions_total": copies,
        "measured_sessions": measured,
        "longest_stream": longest,
        "fill_seconds": round(time.monotonic() - t0, 1),
        "db_bytes": db_path(data_dir).stat().st_size,
        "read_models_filled": read_models,
    }


# ---------------------------------------------------------------------- measuring


def percentiles(samples_us: list[float]) -> dict[str, float]:
    s = sorted(samples_us)
    return {
        "n": len(s),
        "p50_us": round(s[len(s) // 2], 1),
        "p99_us": round(s[min(len(s) - 1, int(len(s) * 0.99))], 1),
        "mean_us": round(statistics.fmean(s), 1),
    }


class _Timed:
    """Wraps a store's ``transact`` to time the function run inside the transaction:
    load state + decide + append + read models, without the batching and the commit."""

    def __init__(self, store: Any) -> None:
        self.inner: list[float] = []
        original = store.transact

        async def transact(fn: Any, **kw: Any) -> Any:
            def timed(conn: Any) -> Any:
                t = time.perf_counter()
                try:
                    return fn(conn)
                finally:
                    self.inner.append((time.perf_counter() - t) * 1e6)

            return await original(timed, **kw)

        store.transact = transact


async def in_process(
    stores: dict[str, Path], sessions: dict[str, list[str]], n: int, chunk: int = 100
) -> dict[str, dict[str, Any]]:
    """``Service.execute`` called directly (no HTTP), alternating stores chunk by chunk so
    that both see the same background load. Per store and command: end-to-end latency
    (``execute``) and the time inside the transaction (decide + append + read models)."""
    from eventcoord.codec import decode_command
    from eventcoord.commands import ClaimIssue, ReleaseIssue
    from eventcoord.context import Caller
    from eventcoord.handlers import HANDLERS
    from eventcoord.service import Service
    from eventcoord.store import open_store

    caller = Caller("default", "admin", operator=True)
    opened: dict[str, tuple[Any, Service, _Timed]] = {}
    for label, data_dir in stores.items():
        store = open_store(f"sqlite+aiosqlite:///{db_path(data_dir)}")
        await store.start()
        opened[label] = (store, Service(store), _Timed(store))

    def bodies(label: str, kind: str, count: int, offset: int) -> list[list[dict[str, Any]]]:
        """Commands of one chunk; a claim is followed by its release."""
        sids = sessions[label]
        out: list[list[dict[str, Any]]] = []
        for k in range(offset, offset + count):
            sid = sids[k % len(sids)]
            if kind == "heartbeat_agent":
                out.append([{"type": kind, "session_id": sid}])
            elif kind == "register_agent":
                out.append([{"type": kind, "actor": f"history-{k}", "host": "bench"}])
            else:
                issue = f"HIST-{k % len(sids)}"
                out.append(
                    [
                        {"type": "claim_issue", "session_id": sid, "project": f"hist{k % len(sids)}", "issue": issue},
                        {"type": "release_issue", "session_id": sid, "issue": issue},
                    ]
                )
        return out

    kinds = ["heartbeat_agent", "register_agent"]
    if ClaimIssue in HANDLERS and ReleaseIssue in HANDLERS:
        kinds.append("claim_issue")
    results: dict[str, dict[str, Any]] = {label: {} for label in stores}
    try:
        for kind in kinds:
            total = n if kind == "heartbeat_agent" else n // 4
            lat: dict[str, dict[str, list[float]]] = {label: {} for label in stores}
            for offset in range(-chunk, total, chunk):  # the first chunk warms up
                for label, (_store, service, timer) in opened.items():
                    for group in bodies(label, kind, chunk, offset):
                        for body in group:
                            timer.inner.clear()
                            t = time.perf_counter()
                            answer = await service.execute(caller, decode_command(json.dumps(body).encode()))
                            elapsed = (time.perf_counter() - t) * 1e6
                            if answer.refusal is not None:
                                raise RuntimeError(
                                    f"{body} answered {answer.status}: {answer.refusal.code} {answer.refusal.message}"
                                )
                            if offset >= 0:
                                lat[label].setdefault(body["type"], []).append(elapsed)
                                lat[label].setdefault(body["type"] + " (in transaction)", []).append(sum(timer.inner))
            for label in stores:
                for name, samples in lat[label].items():
                    results[label][name] = percentiles(samples)
    finally:
        for store, _service, _timer in opened.values():
            await store.close()
    return results


def measure_http(
    stores: dict[str, Path], sessions: dict[str, list[str]], args: argparse.Namespace, work: Path
) -> dict[str, dict[str, Any]]:
    """wrk against both stores' servers, alternating, ``--rounds`` times; medians."""
    servers = {}
    results: dict[str, dict[str, Any]] = {label: {} for label in stores}
    try:
        for label, data_dir in stores.items():
            servers[label] = start_eventcoord(data_dir, free_port(), None, None, log=work / f"{label}-serve.log")
        luas = {label: write_lua(work / f"{label}.lua", sessions[label]) for label in stores}
        for label, server in servers.items():
            run_wrk(server, luas[label], connections=args.connections, duration=3, threads=1, cpus=None, kind="warmup")
        runs: dict[tuple[str, str], list[Run]] = {}
        for _ in range(args.rounds):
            for name, conns in (("latency", 1), ("throughput", args.connections)):
                for label, server in servers.items():
                    wait_quiet(0.3, args.quiet_wait)
                    r = run_wrk(
                        server,
                        luas[label],
                        connections=conns,
                        duration=args.duration,
                        threads=1,
                        cpus=None,
                        kind=f"{label}/{conns}c",
                    )
                    print("  " + fmt_run(r), flush=True)
                    runs.setdefault((label, name), []).append(r)
        for (label, name), rs in runs.items():
            results[label][name] = {
                "connections": 1 if name == "latency" else args.connections,
                "rps": round(statistics.median(r.rps for r in rs)),
                "p50_ms": round(statistics.median(r.p50_ms for r in rs), 3),
                "p99_ms": round(statistics.median(r.p99_ms for r in rs), 3),
                "errors": [r.errors for r in rs if r.errors],
                "server_cpu_us_per_req": round(statistics.median(r.server_cpu_us_per_req for r in rs)),
            }
    finally:
        for server in servers.values():
            server.stop()
    return results


# ---------------------------------------------------------------------------------------
# --tiers: every command type and read model, fresh vs. history vs. load
# ---------------------------------------------------------------------------------------

#: The measured commands, in the order each sample sends them.
TIER_COMMANDS = (
    "heartbeat_agent",
    "register_agent",
    "claim_issue",
    "release_issue",
    "claim_files",
    "release_files",
    "claim_files (conflict)",
    "post_message",
    "enqueue_work",
    "claim_next_work",
    "finish_work",
    "acquire_lease",
    "release_lease",
    "claim_next_work (at cap)",
    "claim_next_work (behind blocked)",
    "claim_next_work (behind held)",
)
#: Big enough that the measured project never refuses, even with every load lease in it.
TIER_WIP = 100_000
#: Items queued ahead of the pulls at the cap, behind blocked items and behind held issues,
#: in every store (the load store queues ``--queued`` more of each).
TIER_CAP_AHEAD = 5


class _Tier:
    """One store of the tiers bench: its service, caller, sessions and timer."""

    def __init__(self, label: str, store: Any) -> None:
        from eventcoord.context import Caller
        from eventcoord.service import Service

        self.label, self.store, self.service = label, store, Service(store)
        self.caller = Caller("default", "admin", operator=True)
        self.timer = _Timed(store)
        self.me = self.other = ""

    async def send(self, body: dict[str, Any], *, refused: bool = False) -> dict[str, Any]:
        from eventcoord.codec import decode_command

        outcome = await self.service.execute(self.caller, decode_command(json.dumps(body).encode()))
        if (outcome.refusal is not None) != refused:
            code = None if outcome.refusal is None else outcome.refusal.code
            raise RuntimeError(f"{self.label}: {body['type']} answered {outcome.status} {code}")
        result: dict[str, Any] = outcome.result or {}
        return result

    async def register(self, actor: str) -> str:
        sid: str = (await self.send({"type": "register_agent", "actor": actor, "host": "bench"}))["session_id"]
        return sid


async def _tier_setup(t: _Tier) -> None:
    """What every store has: the measured sessions, a live holder of ``conf/x.py``, the projects,
    and a day's TTL: the load's agents at work stay live through the measurement."""

    def day_ttl(conn: Any) -> None:
        from sqlalchemy import update

        from eventcoord.store.schema import settings

        conn.execute(update(settings).where(settings.c.key == "ttl_seconds").values(value="86400"))

    await t.store.transact(day_ttl)
    t.me, t.other = await t.register("measured"), await t.register("holder")
    await t.send({"type": "configure_project", "project": "M", "wip_limit": TIER_WIP})
    await t.send({"type": "configure_project", "project": "H", "wip_limit": TIER_WIP})
    await t.send({"type": "claim_files", "session_id": t.other, "issue": "CONF", "paths": ["conf/x.py"]})
    # Project C is at its cap (1, held by the live holder) with a few items on issues queued
    # ahead of what the measured pulls take (an item without an issue, behind them).
    await t.send({"type": "configure_project", "project": "C", "wip_limit": 1})
    await t.send({"type": "claim_issue", "session_id": t.other, "project": "C", "issue": "C-HELD"})
    for i in range(TIER_CAP_AHEAD):
        await t.send({"type": "enqueue_work", "project": "C", "issue": f"C-{i}", "priority": 1})
    # Project D: as many items blocked (each by an unfinished item of its own) queued ahead.
    await _queue_blocked(t, TIER_CAP_AHEAD)
    # Project E: as many items on issues the live holder holds, queued ahead.
    await t.send({"type": "configure_project", "project": "E", "wip_limit": TIER_WIP})
    await _queue_held(t, "E", range(TIER_CAP_AHEAD))


async def _queue_held(t: _Tier, prefix: str, numbers: range) -> None:
    """Items of project E on issues the live holder claims, queued ahead of the pulls behind
    them (a higher priority): a pull may take none of them."""
    for i in numbers:
        await t.send({"type": "claim_issue", "session_id": t.other, "project": "E", "issue": f"{prefix}-{i}"})
        await t.send({"type": "enqueue_work", "project": "E", "issue": f"{prefix}-{i}", "priority": 1})


async def _queue_blocked(t: _Tier, n: int) -> None:
    """``n`` items of project D, each blocked by a still queued item of project B, queued
    ahead of the pulls behind them (a higher priority)."""
    for _ in range(n):
        blocker = (await t.send({"type": "enqueue_work", "project": "B", "priority": -1}))["item_id"]
        await t.send({"type": "enqueue_work", "project": "D", "priority": 1, "blocked_by": [blocker]})


async def _tier_history(t: _Tier, cycles: int, workers: int = 16) -> None:
    """``cycles`` rounds of every command type, all released or finished afterwards."""
    sids = [await t.register(f"hist-{w}") for w in range(workers)]

    async def worker(w: int) -> None:
        sid = sids[w]
        for k in range(w, cycles, workers):
            await t.send({"type": "heartbeat_agent", "session_id": sid})
            if w == 0:  # the holder of conf/x.py stays live however long the fill takes
                await t.send({"type": "heartbeat_agent", "session_id": t.other})
            await t.send({"type": "claim_issue", "session_id": sid, "project": "M", "issue": f"HIST-{k}"})
            await t.send({"type": "release_issue", "session_id": sid, "issue": f"HIST-{k}"})
            # the measured hot issue's own history: claimed and released again and again
            await t.send(
                {"type": "claim_files", "session_id": sid, "issue": f"HOT-{w}", "paths": [f"hist/d{k % 50}/f{k}.py"]}
            )
            await t.send({"type": "release_files", "session_id": sid, "issue": f"HOT-{w}"})
            await t.send(
                {"type": "claim_files", "session_id": sid, "issue": "OTHER", "paths": ["conf/x.py"]}, refused=True
            )
            await t.send(
                {"type": "post_message", "session_id": sid, "channel": "project:bench", "body": f"history {k}"}
            )
            item = (await t.send({"type": "enqueue_work", "project": "Q"}))["item_id"]
            await t.send({"type": "claim_next_work", "session_id": sid, "project": "Q"})
            await t.send({"type": "finish_work", "session_id": sid, "item_id": item, "outcome": "cancelled"})
            await t.send({"type": "acquire_lease", "session_id": sid, "name": f"hist-{w}"})
            await t.send({"type": "release_lease", "session_id": sid, "name": f"hist-{w}"})

    await asyncio.gather(*(worker(w) for w in range(workers)))


async def _tier_load(
    t: _Tier, live_claims: int, live_leases: int, queued: int, in_work: int, workers: int = 16
) -> None:
    """Live rows that the measured commands must not read: claims in other paths, leases,
    and items queued in the measured queue behind the measured item (a lower priority):
    each pull must find its item first without reading or sorting them; and ``in_work`` of
    those items taken by as many live agents, one each (every queue command looks for the
    project's stale workers, and must not walk the live ones)."""
    holder = await t.register("load-claims")
    for start in range(0, live_claims, 100):
        paths = [f"load/d{i % 100}/f{i}.py" for i in range(start, min(start + 100, live_claims))]
        await t.send({"type": "claim_files", "session_id": holder, "issue": f"LOAD-{start}", "paths": paths})
    sids = [await t.register(f"load-{w}") for w in range(workers)]

    async def worker(w: int) -> None:
        for k in range(w, live_leases, workers):
            await t.send({"type": "claim_issue", "session_id": sids[w], "project": "M", "issue": f"LOAD-{k}"})
        for _ in range(w, queued, workers):
            await t.send({"type": "enqueue_work", "project": "Q", "priority": -1})
        for k in range(w, queued, workers):  # on issues, ahead of the pulls at the cap
            await t.send({"type": "enqueue_work", "project": "C", "issue": f"C-LOAD-{k}", "priority": 1})
        await _queue_blocked(t, len(range(w, queued, workers)))  # blocked, ahead of the pulls behind them
        await _queue_held(t, f"E-LOAD-{w}", range(w, queued, workers))  # on held issues, likewise

    async def at_work(w: int) -> None:
        for k in range(w, in_work, workers):
            sid = await t.register(f"at-work-{k}")
            taken = await t.send({"type": "claim_next_work", "session_id": sid, "project": "Q"})
            if taken.get("item") is None:
                raise RuntimeError(f"{t.label}: no queued item of Q left for agent {k} at work (--queued)")

    await asyncio.gather(*(worker(w) for w in range(workers)))
    await asyncio.gather(*(at_work(w) for w in range(workers)))


async def _tier_sample(t: _Tier, k: int, lat: dict[str, list[float]], inner: dict[str, list[float]]) -> None:
    """One of each measured command (timed) on store ``t``; ``k`` keeps names unique."""
    me = t.me
    bodies: list[tuple[str, dict[str, Any], bool]] = [
        ("heartbeat_agent", {"type": "heartbeat_agent", "session_id": me}, False),
        ("register_agent", {"type": "register_agent", "actor": f"m-{k}", "host": "bench"}, False),
        ("claim_issue", {"type": "claim_issue", "session_id": me, "project": "M", "issue": f"MEAS-{k}"}, False),
        ("release_issue", {"type": "release_issue", "session_id": me, "issue": f"MEAS-{k}"}, False),
        (
            "claim_files",
            {"type": "claim_files", "session_id": me, "issue": "HOT-0", "paths": [f"meas/d{k % 50}/f{k}.py"]},
            False,
        ),
        ("release_files", {"type": "release_files", "session_id": me, "issue": "HOT-0"}, False),
        (
            "claim_files (conflict)",
            {"type": "claim_files", "session_id": me, "issue": "OTHER", "paths": ["conf/x.py"]},
            True,
        ),
        (
            "post_message",
            {"type": "post_message", "session_id": me, "channel": "project:bench", "body": f"sample {k}"},
            False,
        ),
        ("enqueue_work", {"type": "enqueue_work", "project": "Q"}, False),
        ("claim_next_work", {"type": "claim_next_work", "session_id": me, "project": "Q"}, False),
        ("finish_work", {}, False),
        ("acquire_lease", {"type": "acquire_lease", "session_id": me, "name": "meas"}, False),
        ("release_lease", {"type": "release_lease", "session_id": me, "name": "meas"}, False),
    ]
    await t.send({"type": "heartbeat_agent", "session_id": t.other})  # untimed: the conflict's holder stays live
    item = ""
    for name, body, refused in bodies:
        if name == "finish_work":
            body = {"type": "finish_work", "session_id": me, "item_id": item, "outcome": "cancelled"}
        t.timer.inner.clear()
        start = time.perf_counter()
        result = await t.send(body, refused=refused)
        lat.setdefault(name, []).append((time.perf_counter() - start) * 1e6)
        inner.setdefault(name, []).append(sum(t.timer.inner))
        if name == "enqueue_work":
            item = result["item_id"]
    # At the cap (C): only the item without an issue may be taken, behind every item on an
    # issue; behind blocked items (D) and behind items on issues others hold (E): the one
    # item that is neither.
    pulls = (
        ("claim_next_work (at cap)", "C"),
        ("claim_next_work (behind blocked)", "D"),
        ("claim_next_work (behind held)", "E"),
    )
    for name, project in pulls:
        plain = (await t.send({"type": "enqueue_work", "project": project}))["item_id"]
        t.timer.inner.clear()
        start = time.perf_counter()
        result = await t.send({"type": "claim_next_work", "session_id": me, "project": project})
        lat.setdefault(name, []).append((time.perf_counter() - start) * 1e6)
        inner.setdefault(name, []).append(sum(t.timer.inner))
        if (result.get("item") or {}).get("item_id") != plain:
            raise RuntimeError(f"{t.label}: {name} took {result}, not {plain}")
        await t.send({"type": "finish_work", "session_id": me, "item_id": plain, "outcome": "cancelled"})


TIER_LABELS = ("fresh", "history", "load")


def tiers_child(
    db: str | None, cycles: int, live_claims: int, live_leases: int, queued: int, in_work: int, samples: int
) -> dict[str, Any]:
    """Fresh, history and load stores on one backend (fresh databases made outside the loop)."""
    with contextlib.ExitStack() as stack:
        if db:
            from command_path import fresh_postgres

            urls = {label: stack.enter_context(fresh_postgres(db)) for label in TIER_LABELS}
        else:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="eventcoord-tiers-")))
            urls = {label: f"sqlite+aiosqlite:///{folder}/{label}.db" for label in TIER_LABELS}
        return asyncio.run(_tiers(urls, cycles, live_claims, live_leases, queued, in_work, samples))


async def _tiers(
    urls: dict[str, str],
    cycles: int,
    live_claims: int,
    live_leases: int,
    queued: int,
    in_work: int,
    samples: int,
    chunk: int = 10,
) -> dict[str, Any]:
    """The three stores, filled, then measured alternately, in this process."""
    from eventcoord.store import open_store

    labels = TIER_LABELS
    out: dict[str, Any] = {"labels": labels}
    tiers: dict[str, _Tier] = {}
    for label in labels:
        store = open_store(urls[label])
        await store.start()
        await store.migrate()
        tiers[label] = _Tier(label, store)
    try:
        for t in tiers.values():
            await _tier_setup(t)
        t0 = time.perf_counter()
        await _tier_history(tiers["history"], cycles)
        out["history_fill_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        await _tier_load(tiers["load"], live_claims, live_leases, queued, in_work)
        out["load_fill_s"] = round(time.perf_counter() - t0, 1)
        if os.environ.get("TIERS_ANALYZE"):  # diagnosis: the same with planner statistics gathered
            for t in tiers.values():
                await t.store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
        lat: dict[str, dict[str, list[float]]] = {label: {} for label in labels}
        inner: dict[str, dict[str, list[float]]] = {label: {} for label in labels}
        for k0 in range(-chunk, samples, chunk):  # the first chunk warms up
            for label, t in tiers.items():
                scratch: tuple[dict[str, list[float]], dict[str, list[float]]] = ({}, {})
                for k in range(k0, k0 + chunk):
                    await _tier_sample(t, k + chunk, *(scratch if k0 < 0 else (lat[label], inner[label])))
        for label in labels:
            out[label] = {
                name: {"p50_us": statistics.median(v), "inner_p50_us": statistics.median(inner[label][name])}
                for name, v in lat[label].items()
            }
    finally:
        for t in tiers.values():
            await t.store.close()
    return out


def run_tiers(args: argparse.Namespace) -> dict[str, Any]:
    """The tiers bench on each code tree (baseline, this tree), one child process each."""
    root = Path(__file__).resolve().parent.parent
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="eventcoord-baseline-") as tmp:
        trees: list[tuple[str, Path | None]] = [("this tree", None)]
        if args.baseline:
            trees.insert(0, (f"before ({args.baseline})", baseline_tree(args.baseline, Path(tmp))))
        for name, src in trees:
            env = dict(os.environ)
            if src is not None:
                env["PYTHONPATH"] = f"{src}{os.pathsep}{env.get('PYTHONPATH', '')}"
            argv = [
                sys.executable,
                __file__,
                "--tiers-child",
                "--cycles",
                str(args.cycles),
                "--live-claims",
                str(args.live_claims),
            ]
            argv += ["--live-leases", str(args.live_leases), "--queued", str(args.queued)]
            argv += ["--in-work", str(args.in_work)]
            argv += ["--samples", str(args.samples)] + (["--db", args.db] if args.db else [])
            print(
                f"{name}: filling history ({args.cycles:,} cycles of every command) and load, then measuring ...",
                flush=True,
            )
            done = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(done.stderr[-4000:])
            results[name] = json.loads(done.stdout.strip().splitlines()[-1])
            r = results[name]
            print(f"  filled in {r['history_fill_s']} s (history), {r['load_fill_s']} s (load)", flush=True)
    names = list(results)
    head_cells = "".join(f" | {n}: fresh us | history x | load x" for n in names)
    print("\np50 in-process (Service.execute) per command; x = that store / fresh, the stores measured alternately")
    print(f"| command{head_cells} |")
    print("| --- |" + " ---: | ---: | ---: |" * len(names))
    for cmd in TIER_COMMANDS:
        cells = []
        for n in names:
            r = results[n]
            f = r["fresh"][cmd]["p50_us"]
            cells += [f"{f:,.0f}", f"{r['history'][cmd]['p50_us'] / f:.2f}", f"{r['load'][cmd]['p50_us'] / f:.2f}"]
        print(f"| {cmd} | " + " | ".join(cells) + " |")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--events", type=int, default=10_000_000, help="events in the filled log (default 10,000,000)")
    p.add_argument(
        "--hot",
        type=int,
        default=1_000_000,
        help="of which extra heartbeats on the measured streams (default 1,000,000)",
    )
    p.add_argument(
        "--cycle",
        type=int,
        default=10,
        help="events per replicated session: register, claim + release, heartbeats (default 10)",
    )
    p.add_argument("--sessions", type=int, default=64, help="measured sessions (default 64)")
    p.add_argument("--connections", type=int, default=64, help="wrk connections of the throughput runs (default 64)")
    p.add_argument("--duration", type=int, default=5, help="seconds per wrk run (default 5)")
    p.add_argument("--rounds", type=int, default=3, help="alternating fresh/filled wrk rounds (default 3)")
    p.add_argument("--in-process", type=int, default=3000, help="heartbeats timed in-process per store (default 3000)")
    p.add_argument(
        "--quiet-wait",
        type=float,
        default=30.0,
        help="before each wrk run wait up to this many s for other load to drop below 0.3 cores",
    )
    p.add_argument("--work", type=Path, help="work folder, kept (default: a temporary one, removed)")
    p.add_argument("--reuse", action="store_true", help="reuse the stores already filled in --work")
    p.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    tiers = p.add_argument_group("--tiers: every command type and read model (in-process, SQLite or --db)")
    tiers.add_argument("--tiers", action="store_true", help="fresh vs. history vs. load for every command type")
    tiers.add_argument("--baseline", help="with --tiers: also run a git revision's code (before/after side by side)")
    tiers.add_argument(
        "--db", help="with --tiers: postgresql+asyncpg://user@host:port (fresh databases); default SQLite"
    )
    tiers.add_argument("--cycles", type=int, default=5000, help="history: rounds of every command type (default 5,000)")
    tiers.add_argument(
        "--live-claims", type=int, default=10_000, help="load: live file claims in other paths (default 10,000)"
    )
    tiers.add_argument(
        "--live-leases", type=int, default=5000, help="load: unreleased leases in the measured project (default 5,000)"
    )
    tiers.add_argument(
        "--queued",
        type=int,
        default=5000,
        help="load: items queued behind the measured pulls, and ahead of the pulls at the cap (default 5,000)",
    )
    tiers.add_argument(
        "--in-work",
        type=int,
        default=3000,
        help="load: of those queued behind the pulls, how many live agents have taken, one each (default 3,000)",
    )
    tiers.add_argument("--samples", type=int, default=300, help="timed samples of each command per store (default 300)")
    tiers.add_argument("--tiers-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.tiers_child:
        print(
            json.dumps(
                tiers_child(
                    args.db, args.cycles, args.live_claims, args.live_leases, args.queued, args.in_work, args.samples
                )
            )
        )
        return 0
    if args.tiers:
        tier_results = run_tiers(args)
        if args.json:
            args.json.write_text(json.dumps(tier_results, indent=2))
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="eventcoord-history-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "python": sys.version.split()[0],
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    stores = {"fresh": work / "fresh", "filled": work / "filled"}
    sessions: dict[str, list[str]] = {}
    try:
        for label, total, hot in (("fresh", 0, 0), ("filled", args.events, args.hot)):
            data = stores[label]
            info_file = work / f"{label}.json"
            if args.reuse and info_file.exists():
                info = json.loads(info_file.read_text())
                print(f"{label}: reusing {data}", flush=True)
            else:
                shutil.rmtree(data, ignore_errors=True)
                data.mkdir()
                print(
                    f"{label}: template session, then fill to {max(total, args.sessions * args.cycle):,} events",
                    flush=True,
                )
                info = fill(data, make_template(data, args.cycle), sessions=args.sessions, total_events=total, hot=hot)
                info_file.write_text(json.dumps(info))
            print(
                f"  {info['events']:,} events, {info['sessions_total']:,} sessions, longest stream "
                f"{info['longest_stream']:,}, "
                f"{info['db_bytes'] / 2**20:,.0f} MiB, filled in {info['fill_seconds']} s",
                flush=True,
            )
            sessions[label] = info["measured_sessions"]
            results[label] = {"store": {k: v for k, v in info.items() if k != "measured_sessions"}}
        print("HTTP (wrk, heartbeat_agent rotating over the measured sessions), alternating stores:", flush=True)
        for label, r in measure_http(stores, sessions, args, work).items():
            results[label].update(r)
        print("in-process (Service.execute, no HTTP), alternating stores:", flush=True)
        for label, r in asyncio.run(in_process(stores, sessions, args.in_process)).items():
            results[label]["in_process"] = r
        print("\nfilled / fresh (medians):")
        ratios: dict[str, float] = {}
        for name in ("latency", "throughput"):
            f, g = results["fresh"][name], results["filled"][name]
            ratios[f"http_{name}_rps"] = g["rps"] / f["rps"]
            print(
                f"  HTTP {name:<10} ({f['connections']:>2} conn): req/s {f['rps']:>6} -> {g['rps']:>6} "
                f"(x{ratios[f'http_{name}_rps']:.2f})"
                f"   p50 {f['p50_ms']:.2f} -> {g['p50_ms']:.2f} ms   p99 {f['p99_ms']:.2f} -> {g['p99_ms']:.2f} ms"
            )
        for cmd, f in results["fresh"]["in_process"].items():
            g = results["filled"]["in_process"][cmd]
            ratios[f"in_process {cmd} p50"] = g["p50_us"] / f["p50_us"]
            print(
                f"  in-process {cmd:<33} p50 {f['p50_us']:>6.0f} -> {g['p50_us']:>6.0f} us "
                f"(x{ratios[f'in_process {cmd} p50']:.2f})   p99 {f['p99_us']:>6.0f} -> {g['p99_us']:>6.0f} us"
            )
        results["ratios"] = ratios
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    finally:
        if args.work is None:
            with contextlib.suppress(OSError):
                shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
