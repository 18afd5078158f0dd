"""Plans, not timings: the hot reads of the files tier use the indexes of live rows only.

claim_files used to find its overlap candidates through ``ix_file_claims_workspace_time``
on SQLite (every claim of the workspace, released ones included), so it slowed down with
history. Each test here fills a workspace with much history (released claims)
and some live claims, lets the planner gather statistics (``ANALYZE``), then asks the
database for the plan of the very statements the handlers and read models run, with the
parameters they pass, and asserts the plan names the partial index of unreleased claims.

Also: the count of a project's unreleased leases that the WIP cap reads
(``project_leases``) equals the leases table after a workload of grants, releases,
reclaims and queue pulls.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from sqlalchemy import Connection, func, select, text
from sqlalchemy.dialects import postgresql as postgresql_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from eventcoord.api.queries.files import rows_since
from eventcoord.api.queries.queue import page_of_items
from eventcoord.api.queries.sessions import page_of_agents
from eventcoord.codec import decode_command
from eventcoord.context import Caller
from eventcoord.projections import files as files_projection
from eventcoord.projections import leases as leases_projection
from eventcoord.projections import queue as queue_projection
from eventcoord.projections.sessions import declaring_key
from eventcoord.projections.tables import (
    conflicts,
    file_claims,
    leases,
    project_leases,
    sessions,
    work_blockers,
    work_items,
)
from eventcoord.reads import common
from eventcoord.reads import files as files_reads
from eventcoord.reads import issues as issues_reads
from eventcoord.reads import queue as queue_reads
from eventcoord.service import Service
from eventcoord.store.postgres.ahead import files as files_ahead
from eventcoord.store.postgres.ahead import queue as queue_ahead
from eventcoord.store.prepared import Prepared, _Pg
from eventcoord.store.schema import guards

WS = "plans"
#: The partial indexes of unreleased claims (PostgreSQL may pick any for "every live claim").
LIVE_INDEXES = (
    "ix_file_claims_live",
    "ix_file_claims_live_key",
    "ix_file_claims_issue_live",
    "ix_file_claims_live_order",
)
RELEASED = 20_000
LIVE = 1_000
HOT_KEY = files_projection.issue_key(WS, "HOT")


def _rows() -> list[dict[str, Any]]:
    """Released history under ``old/``, live claims under ``live/``, one issue claimed often."""
    rows = []
    for i in range(RELEASED + LIVE):
        live = i >= RELEASED
        path = f"live/d{i % 50}/f{i}.py" if live else f"old/d{i % 50}/f{i}.py"
        rows.append(
            {
                "position": 10 + i,
                "idx": 0,
                "workspace": WS,
                "issue": f"I-{i % 40}" if live else "HOT",
                "session_id": f"s{i % 7}",
                "actor_key": "a",
                "path": path,
                "literal_prefix": path,
                "exclusive": True,
                "claimed_us": 1_000_000 + i,
                "released_us": None if live else 2_000_000 + i,
                "release_reason": None if live else "released",
            }
        )
    return rows


async def _fill(store: Any, *, analyze: bool = True) -> None:
    def fill(conn: Connection) -> None:
        conn.execute(file_claims.insert(), _rows())

    await store.transact(fill)
    if analyze:
        await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))


def _compiled(stmt: Prepared, dialect: str) -> tuple[str, dict[str, Any]]:
    """The SQL of a statement and the values of its literals (``kind != 'human'`` is a bind)."""
    built: Any = stmt.statement(dialect)
    if hasattr(built, "text"):
        return str(built.text), {}
    named = sqlite_dialect.dialect(paramstyle="named") if dialect == "sqlite" else postgresql_dialect.dialect()
    compiled = built.compile(dialect=named)
    return str(compiled), {k: v for k, v in compiled.params.items() if v is not None}


def _sql(stmt: Prepared, dialect: str) -> str:
    return _compiled(stmt, dialect)[0]


async def _plans(store: Any, statements: list[tuple[Prepared, dict[str, Any]]]) -> list[str]:
    """The plan of each statement, as the database reports it (one string each)."""

    def explain(conn: Connection) -> list[str]:
        out = []
        for stmt, params in statements:
            sql, literals = _compiled(stmt, conn.dialect.name)
            if conn.dialect.name == "sqlite":
                rows = conn.execute(text("EXPLAIN QUERY PLAN " + sql), {**literals, **params}).all()
                out.append("\n".join(str(r[-1]) for r in rows))
            else:
                rows = conn.execute(text("EXPLAIN " + sql), params).all()
                out.append("\n".join(str(r[0]) for r in rows))
        return out

    plans: list[str] = await store.transact(explain)
    return plans


def _pg_probe_params() -> dict[str, Any]:
    probes = files_reads.probe_ranges({"live/d3/f20003.py", "live/d4/"})
    assert probes is not None
    return files_reads.pg_probes(WS, probes)


async def test_overlap_probes_read_only_the_index_of_unreleased_claims(store: Any, backend: str) -> None:
    if backend == "postgresql":  # before any statistics exist, the planner must not drift either
        await _fill(store, analyze=False)
        [probes] = await _plans(store, [(files_reads._PG_PROBES, _pg_probe_params())])
        assert "ix_file_claims_live_key" in probes and "Seq Scan on file_claims" not in probes, probes
        await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
    else:
        await _fill(store)
    if backend == "sqlite":
        statements = [
            (files_reads._EQ, {"ws": WS, "p": "live/"}),
            (files_reads._RANGE, {"ws": WS, "lo": "live/d3/f20003.py", "hi": "live/d3/f20003.pz"}),
            (files_reads._ALL_LIVE, {"ws": WS}),
        ]
        eq, rng, every = await _plans(store, statements)
        assert "USING INDEX ix_file_claims_live (workspace=? AND literal_prefix=?)" in eq, eq
        assert "USING INDEX ix_file_claims_live (workspace=? AND literal_prefix>? AND literal_prefix<?)" in rng, rng
        assert "ix_file_claims_live" in every and "workspace_time" not in every, every
    else:
        [probes] = await _plans(store, [(files_reads._PG_PROBES, _pg_probe_params())])
        assert "ix_file_claims_live_key" in probes, probes
        assert "Seq Scan on file_claims" not in probes and "workspace_time" not in probes, probes
        [every] = await _plans(store, [(files_reads._ALL_LIVE, {"ws": WS})])
        assert any(f"Index Scan on {name} " in every for name in LIVE_INDEXES), every
        assert "Seq Scan" not in every, every


async def test_a_file_command_s_session_and_claims_read_together_by_their_own_indexes(store: Any, backend: str) -> None:
    """PostgreSQL, once a batch holds the workspace's lock, a claim reads its session with
    its probes (or the batch reads them ahead for all its claims), a release its session,
    whether anyone waits for files and its claims of the issue, each in one statement: each
    part by its own index, in the generic plan made on empty tables, filled before any
    ANALYZE, and after."""
    if backend != "postgresql":
        pytest.skip("PostgreSQL's statements (SQLite reads them apart)")
    probes = _pg_probe_params()
    statements: list[tuple[Prepared, dict[str, Any]]] = [
        (files_ahead._SESSION_AND_PROBES, {"sid": "s1", "ws": WS, **probes}),
        (files_ahead._SESSION_AND_ISSUE_CLAIMS, {"sid": "s1", "ws": WS, "key": HOT_KEY}),
        (  # the same for two claims at once, read ahead for a batch
            files_ahead._CLAIMS_AHEAD,
            {
                "ws": [WS, WS],
                "sid": ["s1", "s2"],
                "lo": probes["lo"] * 2,
                "hi": probes["hi"] * 2,
                "rn": [1] * len(probes["lo"]) + [2] * len(probes["lo"]),
            },
        ),
        (  # and for two releases
            files_ahead._RELEASES_AHEAD,
            {"ws": [WS, WS], "sid": ["s1", "s2"], "key": [HOT_KEY, HOT_KEY]},
        ),
    ]
    expected = [
        ["ix_file_claims_live_key", "sessions_pkey"],
        ["ix_file_claims_issue_live_key", "ix_waits_line", "sessions_pkey"],
        ["ix_file_claims_live_key", "sessions_pkey"],
        ["ix_file_claims_issue_live_key", "ix_waits_line", "sessions_pkey"],
    ]

    async def check(when: str) -> None:
        plans = await _generic_plans(store, statements)
        for (stmt, _), indexes, plan in zip(statements, expected, plans, strict=True):
            if when == "after ANALYZE":  # (the planner knows the lines are empty: it may scan them)
                indexes = [i for i in indexes if i != "ix_waits_line"]
                plan = plan.replace("Seq Scan on waits", "")
            assert [i for i in _index_of(plan) if i != "ix_waits_line" or when != "after ANALYZE"] == indexes, (
                when,
                _sql(stmt, backend),
                plan,
            )
            assert "Seq Scan" not in plan, (when, _sql(stmt, backend), plan)

    await check("empty tables")
    people, _ = _queue_history()
    await store.transact(lambda conn: conn.execute(sessions.insert(), people))
    await _fill(store, analyze=False)
    await check("filled, before ANALYZE")
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
    await check("after ANALYZE")


async def test_an_issues_unreleased_claims_are_read_without_its_history(store: Any, backend: str) -> None:
    """release_files and its read model: the issue ``HOT`` has 20,000 released claims."""
    await _fill(store)
    paths = ["old/d1/f1.py"]
    param_paths: Any = json.dumps(paths) if backend == "sqlite" else paths
    select_plan, update_plan = await _plans(
        store,
        [
            (files_reads._OF_ISSUE, {"ws": WS, "issue": "HOT", "key": HOT_KEY, "sid": "s1"}),
            (
                files_projection._RELEASE,
                {
                    "ws": WS,
                    "issue": "HOT",
                    "key": HOT_KEY,
                    "sid": "s1",
                    "at": 3,
                    "reason": "released",
                    "paths": param_paths,
                },
            ),
        ],
    )
    for plan in (select_plan, update_plan):
        assert ("ix_file_claims_issue_live_key" if backend == "postgresql" else "ix_file_claims_issue_live") in plan, (
            plan
        )
        assert "ix_file_claims_issue " not in plan + " " and "Seq Scan on file_claims" not in plan, plan


async def test_the_count_of_unreleased_leases_per_project_follows_the_leases(store: Any) -> None:
    """Grants, releases, an expired reclaim, a forced takeover, queue pulls and finishes."""
    service = Service(store)
    admin = Caller(WS, "admin", operator=True)

    async def send(body: dict[str, Any], caller: Caller = admin) -> dict[str, Any]:
        outcome = await service.execute(caller, decode_command(json.dumps(body).encode()))
        assert outcome.refusal is None, outcome.refusal
        result: dict[str, Any] = outcome.result or {}
        return result

    a = (await send({"type": "register_agent", "actor": "a"}))["session_id"]
    b = (await send({"type": "register_agent", "actor": "b"}))["session_id"]
    await send({"type": "configure_project", "project": "P", "wip_limit": 10})
    for i in range(4):
        await send({"type": "claim_issue", "session_id": a, "project": "P", "issue": f"P-{i}"})
    await send({"type": "release_issue", "session_id": a, "issue": "P-0"})
    await send({"type": "claim_issue", "session_id": b, "project": "Q", "issue": "Q-1"})
    await send({"type": "end_agent", "session_id": b})
    await send(
        {"type": "claim_issue", "session_id": a, "project": "Q", "issue": "Q-1"}
    )  # reclaims the ended holder's lease
    item_id = (await send({"type": "enqueue_work", "project": "P", "issue": "P-9"}))["item_id"]
    pulled = await send({"type": "claim_next_work", "session_id": a, "project": "P"})
    assert item_id in json.dumps(pulled)
    await send({"type": "finish_work", "session_id": a, "item_id": item_id, "outcome": "cancelled"})

    def compare(conn: Connection) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
        kept = {(r.workspace, r.project): r.unreleased for r in conn.execute(select(project_leases)) if r.unreleased}
        counted = conn.execute(
            select(leases.c.workspace, leases.c.project, func.count())
            .where(leases.c.released_us.is_(None))
            .group_by(leases.c.workspace, leases.c.project)
        ).all()
        return kept, {(w, p): n for w, p, n in counted}

    kept, counted = await store.transact(compare)
    assert kept == counted
    assert counted == {(WS, "P"): 3, (WS, "Q"): 1}


async def test_queue_pages_walk_the_enqueue_order_instead_of_sorting_every_item(store: Any, backend: str) -> None:
    """GET /v1/queue and its as_of: 20,000 finished items and a few queued ones; a page of
    the first 1,000 (all, or one status) must walk an index in enqueue order, not sort all."""
    items = [
        {
            "item_id": f"it-{i}",
            "workspace": WS,
            "project": f"P{i % 3}",
            "priority": i % 4,
            "blocked_by": "[]",
            "paths": "[]",
            "status": "queued" if i % 100 == 0 else "done",
            "enqueued_position": 10 + i,
            "enqueued_us": 1_000 + i,
            "updated_us": 2_000 + i,
            "attempts": 1,
        }
        for i in range(RELEASED)
    ]
    await store.transact(lambda conn: conn.execute(work_items.insert(), items))
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))

    def explain(conn: Connection) -> list[str]:
        out = []
        for stmt in (
            page_of_items(WS, None, None, 0, 1000),
            page_of_items(WS, None, "queued", 0, 1000),
            page_of_items(WS, None, None, 0, 500, upto=15_000),
        ):
            sql = str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
            if conn.dialect.name == "sqlite":
                out.append("\n".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql)))
            else:
                out.append("\n".join(str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + sql)))
        return out

    every, queued, upto = await store.transact(explain)
    # Either index in enqueue order walks the page (PostgreSQL may filter the workspace on
    # ix_work_items_enqueued when there is one workspace).
    in_order = ("ix_work_items_order", "ix_work_items_enqueued")
    for plan, indexes in ((every, in_order), (queued, ("ix_work_items_status_order",)), (upto, in_order)):
        assert any(index in plan for index in indexes), plan
        assert "TEMP B-TREE" not in plan and "Sort" not in plan and "Seq Scan" not in plan, plan


async def test_the_heatmap_counts_the_rows_since_a_snapshot_by_position(store: Any, backend: str) -> None:
    """The all-time heatmap adds the claims and conflicts made after the newest snapshot to its
    counts: a range of positions, never a walk of the workspace's every row (which a
    workspace index would give, grouped by path)."""
    collisions = [
        {
            "position": 10 + 2 * i,
            "workspace": WS,
            "path": f"old/d{i % 50}/f{i}.py",
            "issue": "HOT",
            "holder_path": "old/",
            "holder_issue": "I-1",
            "forced": False,
            "occurred_us": 1_000_000 + i,
        }
        for i in range(RELEASED)
    ]
    await store.transact(lambda conn: conn.execute(conflicts.insert(), collisions))
    await _fill(store)

    def explain(conn: Connection) -> list[str]:
        sqlite = conn.dialect.name == "sqlite"
        out = []
        for table in (file_claims, conflicts):
            stmt = rows_since(table, 20_000, 20_500)
            sql = str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
            rows = conn.exec_driver_sql(("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ") + sql)
            out.append("\n".join(str(r[-1] if sqlite else r[0]) for r in rows))
        return out

    for plan in await store.transact(explain):
        if backend == "sqlite":
            assert "position>? AND position<?" in plan or "rowid>? AND rowid<?" in plan, plan
        else:
            assert "Index" in plan and "pkey" in plan and "Seq Scan" not in plan, plan
        assert "workspace" not in plan, plan


async def test_the_agents_page_walks_the_newest_sessions_instead_of_sorting_them_all(store: Any, backend: str) -> None:
    """GET /v1/agents: 20,000 sessions, most of them ended (session churn); the newest 1,000
    (all, or the not-live ones) must come from a walk of ix_sessions_registered."""
    rows = [
        {
            "session_id": f"s-{i:05d}",
            "workspace": WS,
            "actor_key": f"a{i % 50}",
            "identity_source": "test",
            "stable": False,
            "kind": "agent",
            "registered_us": 1_000_000 + i,
            "last_seen_us": 1_000_000 + i,
            "ended_us": None if i % 40 == 0 else 2_000_000 + i,
            "heartbeats": 0,
        }
        for i in range(RELEASED)
    ]
    await store.transact(lambda conn: conn.execute(sessions.insert(), rows))
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))

    def explain(conn: Connection) -> list[str]:
        sqlite = conn.dialect.name == "sqlite"
        out = []
        for live in (None, False):
            stmt = page_of_agents(WS, live, 1_500_000, 1000)
            sql = str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
            got = conn.exec_driver_sql(("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ") + sql)
            out.append("\n".join(str(r[-1] if sqlite else r[0]) for r in got))
        return out

    for plan in await store.transact(explain):
        assert "ix_sessions_registered" in plan, plan
        assert "TEMP B-TREE" not in plan and "Sort" not in plan and "Seq Scan" not in plan, plan


def _literal(value: Any) -> str:
    """A parameter of ``EXECUTE`` as an SQL literal (strings, ints, lists of strings or ints)."""
    if isinstance(value, list):
        kind = "bigint" if value and all(isinstance(v, int) for v in value) else "text"
        return "ARRAY[" + ", ".join(_literal(v) for v in value) + f"]::{kind}[]"
    if isinstance(value, bool | int):
        return str(value).lower() if isinstance(value, bool) else str(value)
    return "'" + str(value).replace("'", "''") + "'"


async def _generic_plans(store: Any, statements: list[tuple[Prepared, dict[str, Any]]]) -> list[str]:
    """PostgreSQL: the *generic* plan of each statement, the one asyncpg's prepared statement
    keeps after five runs (planned once, for any parameters, with the statistics of then)."""

    def explain(conn: Connection) -> list[str]:
        out = []
        conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        for stmt, params in statements:
            pg = _Pg(stmt.statement("postgresql"))
            conn.exec_driver_sql(f"PREPARE plan_probe AS {pg.sql}")
            args = ", ".join(_literal(a) for a in pg.args(params))
            rows = conn.exec_driver_sql(f"EXPLAIN EXECUTE plan_probe({args})").all()
            conn.exec_driver_sql("DEALLOCATE plan_probe")
            out.append("\n".join(str(r[0]) for r in rows))
        conn.exec_driver_sql("RESET plan_cache_mode")
        return out

    plans: list[str] = await store.transact(explain)
    return plans


def _leases(n: int) -> list[dict[str, Any]]:
    """``n`` unreleased leases of one project held by other sessions (the bench's load)."""
    return [
        {
            "lease_id": 10 + i,
            "workspace": WS,
            "issue": f"LOAD-{i}",
            "project": "M",
            "session_id": f"s{i % 16}",
            "actor_key": "a",
            "fencing_token": 1,
            "granted_us": 1_000 + i,
        }
        for i in range(n)
    ]


def _items(n: int) -> list[dict[str, Any]]:
    return [
        {
            "item_id": f"it-{i}",
            "workspace": WS,
            "project": "Q",
            "priority": 0,
            "blocked_by": "[]",
            "paths": "[]",
            "status": "done",
            "enqueued_position": 100_000 + i,
            "enqueued_us": 1_000 + i,
            "updated_us": 2_000 + i,
            "attempts": 1,
            "waiting_on": 0,
            "held_by": None,
        }
        for i in range(n)
    ]


#: The commands' lookups of one live row, each with the one index it may use
#: (docs/decisions/0006-one-index-per-lookup.md): (statement, parameters, index on PostgreSQL,
#: index on SQLite).
_BY_KEY: list[tuple[Prepared, dict[str, Any], str, str]] = [
    (issues_reads._LEASE_FOR_UPDATE, {"ws": WS, "issue": "LOAD-7"}, "uq_leases_unreleased", "uq_leases_unreleased"),
    (issues_reads._LEASE_PLAIN, {"ws": WS, "issue": "LOAD-7"}, "uq_leases_unreleased", "uq_leases_unreleased"),
    (
        leases_projection._RELEASE_LEASE,
        {"ws": WS, "issue": "LOAD-7", "at": 5, "reason": "released"},
        "uq_leases_unreleased",
        "uq_leases_unreleased",
    ),
    (queue_reads._ITEM_FOR_UPDATE, {"ws": WS, "item": "it-7"}, "work_items_pkey", "sqlite_autoindex_work_items_1"),
    (
        queue_projection.STATUSES,
        {"ws": WS, "ids": ["it-7", "it-8"]},
        "work_items_pkey",
        "sqlite_autoindex_work_items_1",
    ),
    (
        queue_projection._FINISHED,
        {"ws": WS, "item": "it-7", "status": "done", "outcome": "cancelled", "at": 5},
        "work_items_pkey",
        "sqlite_autoindex_work_items_1",
    ),
    (
        files_reads._OF_ISSUE,
        {"ws": WS, "issue": "HOT", "key": HOT_KEY, "sid": "s1"},
        "ix_file_claims_issue_live_key",
        "ix_file_claims_issue_live",
    ),
    (
        files_projection._RELEASE,
        {
            "ws": WS,
            "issue": "HOT",
            "key": HOT_KEY,
            "sid": "s1",
            "at": 3,
            "reason": "released",
            "paths": ["old/d1/f1.py"],
        },
        "ix_file_claims_issue_live_key",
        "ix_file_claims_issue_live",
    ),
    (files_reads._PG_PROBES, {}, "ix_file_claims_live_key", ""),
]


def _index_of(plan: str) -> list[str]:
    """The indexes a plan reads (PostgreSQL and SQLite spellings)."""
    import re

    return sorted(
        set(
            re.findall(
                r"(?:Index Scan (?:Backward )?using|(?:Bitmap )?Index Scan on|Index Only Scan using"
                r"|USING (?:COVERING )?INDEX) (\w+)",
                plan,
            )
        )
    )


async def test_each_lookup_of_a_live_row_has_one_index_whatever_the_statistics(store: Any, backend: str) -> None:
    """No plan can drift (docs/decisions/0006-one-index-per-lookup.md): on tables filled fast,
    before any ANALYZE, and in
    the generic plan a prepared statement keeps from when its table was empty, each lookup
    reads the one index made for it. Before: leases by issue walked ``ix_leases_project_live``
    (every live lease of the workspace), work items by id ``ix_work_items_status_order``,
    an issue's claims ``ix_file_claims_live_order`` and the overlap probes a full scan of
    ``ix_file_claims_issue_live``, all picked by a planner that thinks a partial index of
    unreleased rows holds 0.5 % of the table."""
    statements = [(stmt, p) for stmt, p, _, sqlite_index in _BY_KEY if backend == "postgresql" or sqlite_index]
    expected = [
        pg if backend == "postgresql" else lite for _, _, pg, lite in _BY_KEY if backend == "postgresql" or lite
    ]
    for i, (stmt, params) in enumerate(statements):
        if stmt is files_reads._PG_PROBES:
            statements[i] = (stmt, _pg_probe_params())
        elif backend == "sqlite" and "paths" in params:
            statements[i] = (stmt, {**params, "paths": json.dumps(params["paths"])})
        elif backend == "sqlite" and "ids" in params:
            statements[i] = (stmt, {**params, "ids": json.dumps(params["ids"])})

    async def check(when: str) -> None:
        plans = await (_generic_plans(store, statements) if backend == "postgresql" else _plans(store, statements))
        for (stmt, _), index, plan in zip(statements, expected, plans, strict=True):
            assert _index_of(plan) == [index] and "Seq Scan" not in plan, (when, _sql(stmt, backend), plan)

    await check("empty tables")
    await store.transact(lambda conn: conn.execute(leases.insert(), _leases(5_000)))
    await store.transact(lambda conn: conn.execute(work_items.insert(), _items(5_000)))
    await _fill(store, analyze=False)
    await check("filled, before ANALYZE")
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
    await check("after ANALYZE")


def _queue_history() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Sessions (most ended) and 5,000 finished items of project ``Q`` with a few live items:
    queued in ``Q`` and ``R``, claimed and running in ``Q``."""
    people = [
        {
            "session_id": f"s{i}",
            "workspace": WS,
            "actor_key": f"a{i}",
            "identity_source": "test",
            "stable": False,
            "kind": "agent",
            "registered_us": 1_000 + i,
            "last_seen_us": 1_000 + i,
            "ended_us": None if i < 16 else 2_000 + i,
            "heartbeats": 0,
            # s1 and s2 work on an item of Q each (below): the stale workers' index holds them
            "active_items": 1 if i in (1, 2) else 0,
        }
        for i in range(2_000)
    ]
    items = _items(5_000)
    for i, item in enumerate(items):
        item.update(session_id=f"s{i % 16}", issue=f"I-{i % 40}", status="cancelled" if i % 2 else "done")
    live = [("queued", "Q", None)] * 3 + [("queued", "R", None)] * 3 + [("claimed", "Q", "s1"), ("running", "Q", "s2")]
    for n, (status, project, sid) in enumerate(live):
        items.append(
            {**items[0], "item_id": f"live-{n}", "project": project, "status": status, "session_id": sid}
            | {"priority": n % 2, "enqueued_position": 200_000 + n, "issue": "I-1"}
        )
    # queued without an issue (what a pull at the cap reads), in Q and R
    for n, project in enumerate(("Q", "Q", "Q", "R")):
        items.append(
            {**items[0], "item_id": f"free-{n}", "project": project, "status": "queued", "session_id": None}
            | {"priority": n % 2, "enqueued_position": 200_100 + n, "issue": None}
        )
    # queued and ready in Q on issues sessions hold (0017_queue_held): s3's own and s5's
    for n, holder in enumerate(("s3", "s5")):
        items.append(
            {**items[0], "item_id": f"held-{n}", "project": "Q", "status": "queued", "session_id": None}
            | {"priority": 1, "enqueued_position": 200_300 + n, "issue": f"H-{n}", "held_by": holder}
        )
    # queued in Q, on I-1 and on none, waiting on a blocker: no pull reads them
    for n, issue in enumerate(("I-1", None)):
        items.append(
            {**items[0], "item_id": f"waits-{n}", "project": "Q", "status": "queued", "session_id": None}
            | {"priority": 1, "enqueued_position": 200_200 + n, "issue": issue, "waiting_on": 1}
        )
    return people, items


#: The queue's reads of live items (every queue command runs ``_SUSPECTS``; a pull, the
#: pages), each with the indexes it may read: (statement, parameters, PostgreSQL, SQLite).
_QUEUE_KEY = queue_projection.live_key(WS, "Q", "queued")
#: Who pulls: a page holds the items no one holds and its own (0017_queue_held).
_PASSING: dict[str, Any] = {"me": "s3", "mine": queue_projection.held_key(WS, "Q", "s3")}


_QUEUE: list[tuple[Prepared, dict[str, Any], list[str], list[str]]] = [
    (
        queue_reads._SUSPECTS,
        {"ws": WS, "project": "Q", "cutoff": 5},
        ["ix_sessions_stale_workers", "ix_work_items_session"],
        ["ix_sessions_stale_workers", "ix_work_items_session"],
    ),
    # the pages: the ready items no one holds and the puller's own, two walks merged; no
    # lease is read (each item's issue was probed for one before 0017_queue_held)
    (
        queue_reads._FIRST_PAGE,
        {"ws": WS, "project": "Q", "key": _QUEUE_KEY, "page": 4} | _PASSING,
        ["ix_work_items_live_key"],
        ["ix_work_items_held", "ix_work_items_ready"],
    ),
    (
        queue_reads._NEXT_PAGE,
        {"ws": WS, "project": "Q", "key": _QUEUE_KEY, "page": 32, "priority": 1, "priority2": 1, "after": 200_001}
        | _PASSING,
        ["ix_work_items_live_key"],
        ["ix_work_items_held", "ix_work_items_ready"],
    ),
    (
        queue_reads._OTHER_ACTIVE,
        {"sid": "s1", "issue": "I-1", "item": "live-7"},
        ["ix_work_items_session"],
        ["ix_work_items_session"],
    ),
    # a pull at the cap: the queued items without an issue, then those on one issue
    (
        queue_reads._ON_ISSUE_FIRST,
        {"ws": WS, "project": "Q", "issue": None, "qkey": queue_projection.queued_issue_key(WS, "Q", None), "page": 4},
        ["ix_work_items_queued_issue_key"],
        ["ix_work_items_queued_issue"],
    ),
    (
        queue_reads._ON_ISSUE_NEXT,
        {"ws": WS, "project": "Q", "issue": "I-1", "qkey": queue_projection.queued_issue_key(WS, "Q", "I-1")}
        | {"page": 32, "priority": 1, "priority2": 1, "after": 200_001},
        ["ix_work_items_queued_issue_key"],
        ["ix_work_items_queued_issue"],
    ),
    # a grant or a release marks its issue's queued items held or free, by their own index
    (
        queue_projection._MARK_HELD,
        {"ws": WS, "issue": "I-1", "key": f"{WS}\x01I-1", "sid": "s4"},
        ["ix_work_items_queued_on_issue"],
        ["ix_work_items_queued_on_issue"],
    ),
    # a finish ``done``: the items its item blocked, each by its key, wait on one fewer
    (
        queue_projection._UNBLOCK,
        {"ws": WS, "item": "live-0"},
        ["work_blockers_pkey", "work_items_pkey"],
        ["sqlite_autoindex_work_blockers_1", "sqlite_autoindex_work_items_1"],
    ),
]


async def test_the_queue_reads_only_live_items_whatever_the_statistics(store: Any, backend: str) -> None:
    """One index per lookup for the queue: every queue command looks for the project's stale
    workers' items, a pull reads pages of queued items, a finish counts the worker's other
    active items. On empty tables, filled before ANALYZE and after, each reads live items
    only, through the one index that can serve it. Before (PostgreSQL, generic plans): the
    suspects walked ``ix_work_items_status_order`` by the workspace alone (every item it
    ever had) and, after ANALYZE, every item of each stale session through
    ``ix_work_items_session``; the pages were a sequential scan after ANALYZE; the count
    read every item the session ever held (its statuses bound, so only a filter). On
    SQLite the pages sorted every queued item of the project (priority ascending in
    ``ix_work_items_queue``, 0014_queue_pull_order)."""
    statements = [(stmt, params) for stmt, params, _, _ in _QUEUE]
    expected = [pg if backend == "postgresql" else lite for _, _, pg, lite in _QUEUE]

    async def check(when: str) -> None:
        plans = await (_generic_plans(store, statements) if backend == "postgresql" else _plans(store, statements))
        for (stmt, _), indexes, plan in zip(statements, expected, plans, strict=True):
            where = (when, _sql(stmt, backend), plan)
            assert _index_of(plan) == indexes and "Seq Scan" not in plan, where
            assert "status_order" not in plan and "ix_work_items_order" not in plan, where
            if stmt is not queue_reads._OTHER_ACTIVE:  # walked in pull order, never sorted
                # (SQLite sorted every queued item of the project on each pull before 0014);
                # a page's two walks are merged, their ``LIMIT``ed rows sorted at most
                assert "Sort Key: work_items.priority" not in plan, where
                lines = plan.splitlines()
                for before, line in itertools.pairwise(lines):
                    assert "TEMP B-TREE" not in line or before in ("SCAN ready", "SCAN mine"), where
                assert "TEMP B-TREE" not in lines[0], where
        if backend == "postgresql":  # the count reads the session's active items only
            count = plans[[stmt for stmt, _ in statements].index(queue_reads._OTHER_ACTIVE)]
            assert re.search(r"Index Cond: .*session_id.*status", count), (when, count)
            # and so do the stale workers' probes: never every item a stale worker ever had
            suspects = plans[[stmt for stmt, _ in statements].index(queue_reads._SUSPECTS)]
            assert len(re.findall(r"Index Cond: .*session_id.*status", suspects)) == 2, (when, suspects)

    await check("empty tables")
    people, items = _queue_history()
    few = [item for item in items if item["item_id"].startswith("live-")]
    await store.transact(lambda conn: conn.execute(sessions.insert(), people[:16]))
    await store.transact(lambda conn: conn.execute(work_items.insert(), few))
    await check("a few rows")  # a generic plan made then is kept as the table grows
    await store.transact(lambda conn: conn.execute(sessions.insert(), people[16:]))
    await store.transact(lambda conn: conn.execute(work_items.insert(), [i for i in items if i not in few]))
    # each finished item blocked the next (what a chain of enqueued items leaves behind)
    edges = [{"workspace": WS, "blocker_id": f"it-{i}", "item_id": f"it-{i + 1}"} for i in range(4_999)]
    await store.transact(lambda conn: conn.execute(work_blockers.insert(), edges))
    await store.transact(lambda conn: conn.execute(leases.insert(), _leases(5_000)))  # the pages probe them
    await check("filled, before ANALYZE")
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
    await check("after ANALYZE")


async def test_a_session_is_read_by_its_key_whatever_the_statistics(store: Any, backend: str) -> None:
    """Every command reads its session by id: by the primary key only, the workspace checked.
    With ``workspace = $2`` the generic plan made on an empty table read it through
    ``ix_sessions_registered`` (every session of the workspace). PostgreSQL's pull reads its
    session locked with the project's stale workers in one statement (``_SUSPECTS``'s)."""
    pg = backend == "postgresql"
    key = "sessions_pkey" if pg else "sqlite_autoindex_sessions_1"
    by_id = {"sid": "s1", "ws": WS}
    statements: list[tuple[Prepared, dict[str, Any]]] = [(common._SESSION, by_id), (common._SESSION_FOR_UPDATE, by_id)]
    expected = [[key], [key]]
    if pg:
        statements.append((queue_reads._SESSION_AND_SUSPECTS, {**by_id, "cutoff": 5, "project": "Q"}))
        expected.append(["ix_sessions_stale_workers", "ix_work_items_session", key])

    async def check(when: str) -> None:
        plans = await (_generic_plans(store, statements) if pg else _plans(store, statements))
        for (stmt, _), indexes, plan in zip(statements, expected, plans, strict=True):
            assert _index_of(plan) == indexes and "Seq Scan" not in plan, (when, _sql(stmt, backend), plan)

    await check("empty tables")
    people, items = _queue_history()
    await store.transact(lambda conn: conn.execute(sessions.insert(), people))
    await store.transact(lambda conn: conn.execute(work_items.insert(), items))
    await check("filled, before ANALYZE")
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
    await check("after ANALYZE")


async def test_the_queue_statements_find_the_same_items_on_both_backends(store: Any, backend: str) -> None:
    """The live-key statements (PostgreSQL) answer what the column comparisons (SQLite) do."""
    people, items = _queue_history()
    people[1]["last_seen_us"] = 4  # s1 (holds a claimed item of Q) last seen before the cutoff: a suspect
    await store.transact(lambda conn: conn.execute(sessions.insert(), people))
    await store.transact(lambda conn: conn.execute(work_items.insert(), items))

    def read(conn: Connection) -> list[Any]:
        out: list[Any] = []
        for stmt, params, _, _ in _QUEUE:
            if stmt in (queue_projection._UNBLOCK, queue_projection._MARK_HELD):  # writes (tests/e2e/test_queue.py)
                continue
            if stmt is queue_reads._OTHER_ACTIVE:
                params = {**params, "item": "live-0"}
            out.append([tuple(r) for r in stmt.rows(conn, params)])
        return out

    suspects, first, after, others, free, on_issue = await store.transact(read)
    assert suspects == [("s1",)]
    # priority 1 first, then in enqueue order; s3's held item among them, never s5's
    assert [r[0] for r in first] == ["live-1", "free-1", "held-0", "live-0"]
    assert [r[0] for r in after] == ["free-1", "held-0", "live-0", "live-2", "free-0", "free-2"]
    assert others == [(1,)]
    assert [r[0] for r in free] == ["free-1", "free-0", "free-2"]  # Q's queued items without an issue
    assert [r[0] for r in on_issue] == ["live-0", "live-2"]  # Q's queued on I-1, after live-1


async def test_a_claims_and_a_releases_reads_find_each_row_by_its_own_index(store: Any, backend: str) -> None:
    """claim_issue reads its project's rules and count, the issue's row and live lease and
    whether anyone waits or declared, in one statement (``_CLAIM_READS``), and the live
    declarers when someone did (``_DECLARERS``); release_issue reads the caller's session
    and the lease, then the lease locked and whether anyone waits (``_RELEASE_PEEK``,
    ``_RELEASE_READS``). With 5,000 live leases and 2,000 sessions
    in the workspace, before ANALYZE and after, the lease and the declarers are read by the
    indexes made for them, never by the workspace's every live lease or session. Before
    (PostgreSQL, generic plans) the declarers walked ``ix_sessions_workspace_seen``."""
    declaring = {"declaring": declaring_key(WS, "LOAD-7")}
    claim = {"ws": WS, "project": "M", "issue": "LOAD-7", "kind_1": "issue", "cutoff": 5, **declaring}
    declarers = {"ws": WS, "issue": "LOAD-7", "cutoff": 5, **declaring}
    release = {"ws": WS, "sid": "s7", "issue": "LOAD-7", "kind_1": "issue"}
    statements = [
        (issues_reads._CLAIM_READS, claim),
        (issues_reads._DECLARERS, declarers),
        (issues_reads._RELEASE_PEEK, release),
        (issues_reads._RELEASE_READS, release),
    ]
    pg = backend == "postgresql"
    by_key = "ix_sessions_declaring_key" if pg else "ix_sessions_working_on"
    every = ["issues_pkey", by_key, "ix_waits_line", "project_leases_pkey", "projects_pkey", "uq_leases_unreleased"]
    if not pg:
        every = sorted(f"sqlite_autoindex_{i[:-5]}_1" if i.endswith("_pkey") else i for i in every)

    async def check(when: str) -> None:
        plans = await (_generic_plans(store, statements) if pg else _plans(store, statements))
        claim_plan, declarers_plan, peek_plan, release_plan = plans
        session_key = "sessions_pkey" if pg else "sqlite_autoindex_sessions_1"
        assert _index_of(peek_plan) == sorted([session_key, "uq_leases_unreleased"]), (when, peek_plan)
        assert "uq_leases_unreleased" in _index_of(release_plan), (when, release_plan)
        if when == "empty tables":  # (after ANALYZE the planner knows the line is empty)
            assert _index_of(release_plan) == ["ix_waits_line", "uq_leases_unreleased"], (when, release_plan)
        for plan in (peek_plan, release_plan):
            assert "Seq Scan on leases" not in plan and "Seq Scan on sessions" not in plan, (when, plan)
        if when == "empty tables":  # every row by its own index
            assert _index_of(claim_plan) == every and "Seq Scan" not in claim_plan, (when, claim_plan)
        for index in ("uq_leases_unreleased", by_key):  # the tables that grow with the fleet
            assert index in _index_of(claim_plan), (when, claim_plan)
        assert "Seq Scan on leases" not in claim_plan and "Seq Scan on sessions" not in claim_plan, (when, claim_plan)
        assert _index_of(declarers_plan) == [by_key] and "Seq Scan" not in declarers_plan, (when, declarers_plan)

    await check("empty tables")
    people, _ = _queue_history()
    for n, person in enumerate(people):  # a few live sessions declare, on other issues
        person["working_on"] = f"LOAD-{n + 100}" if n < 16 else None
    await store.transact(lambda conn: conn.execute(leases.insert(), _leases(5_000)))
    await store.transact(lambda conn: conn.execute(sessions.insert(), people))
    await check("filled, before ANALYZE")
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
    await check("after ANALYZE")


async def test_a_batch_s_reads_ahead_probe_each_row_by_its_own_index(store: Any, backend: str) -> None:
    """PostgreSQL reads ahead for a batch's claims and releases (their guards, then what the
    guards protect) in one statement each, over arrays: each row must be a probe of its own
    index, never a join that reads a whole table (a generic plan on small tables hashes
    them: the releases' read ahead once read every lease and guard, 86 releases a second)."""
    if backend != "postgresql":
        pytest.skip("only PostgreSQL's batch reads ahead")
    from eventcoord.store.postgres.ahead import common as common_ahead
    from eventcoord.store.postgres.ahead import issues as issues_ahead

    n = 4
    claims = {
        "ws": [WS] * n,
        "project": [f"M{i}" for i in range(n)],
        "issue": [f"LOAD-{i}" for i in range(n)],
        "sid": [f"s{i}" for i in range(n)],
        "declaring": [declaring_key(WS, f"LOAD-{i}") for i in range(n)],
    }
    statements = [
        (issues_ahead._CLAIMS_AHEAD, claims),
        (common_ahead._GUARDS_AHEAD, {"ws": [WS] * n, "key": [f"project:M{i}" for i in range(n)]}),
        (issues_ahead._LEASE_GUARDS_AHEAD, {"ws": [WS] * n, "key": [f"LOAD-{i}" for i in range(n)]}),
    ]
    expected = [
        [
            "issues_pkey",
            "ix_sessions_declaring_key",
            "ix_waits_line",
            "project_leases_pkey",
            "projects_pkey",
            "sessions_pkey",
            "uq_leases_unreleased",
        ],
        ["guards_pkey"],
        ["guards_pkey", "uq_leases_unreleased"],
    ]

    async def check(when: str) -> None:
        for (stmt, _), index, plan in zip(statements, expected, await _generic_plans(store, statements), strict=True):
            assert "Hash" not in plan, (when, _sql(stmt, backend), plan)  # each row a probe, never a join
            if when == "empty tables":  # every row by its own index
                assert _index_of(plan) == index and "Seq Scan" not in plan, (when, plan)
            # the tables that grow with the fleet (an empty one, analyzed, may be scanned)
            for table, by in (
                ("leases", "uq_leases_unreleased"),
                ("sessions", "sessions_pkey"),
                ("guards", "guards_pkey"),
            ):
                if by in index:
                    assert by in _index_of(plan) and f"Seq Scan on {table}" not in plan, (when, plan)

    await check("empty tables")
    people, _ = _queue_history()
    await store.transact(lambda conn: conn.execute(leases.insert(), _leases(5_000)))
    await store.transact(lambda conn: conn.execute(sessions.insert(), people))
    guard_rows = [{"workspace": WS, "key": f"project:G{i}"} for i in range(5_000)]
    await store.transact(lambda conn: conn.execute(guards.insert(), guard_rows))
    await check("filled, before ANALYZE")
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
    await check("after ANALYZE")


async def test_the_queue_s_reads_ahead_probe_each_row_by_its_own_index(store: Any, backend: str) -> None:
    """PostgreSQL reads ahead for a batch's pulls (their projects' rules, suspects, the
    caller's session and first page) and transitions (the items' projects' guards, then
    the item, rules, suspects and session) over arrays: each row a probe of its own index,
    never a join that reads a whole table, and the project's items only through their live
    key, on empty tables, filled before ANALYZE and after."""
    if backend != "postgresql":
        pytest.skip("only PostgreSQL's batch reads ahead")
    from eventcoord.projections.queue import held_key, live_key

    n = 4
    projects = ["Q", "R", "Q", "S"]
    pulls = {
        "ws": [WS] * n,
        "project": projects,
        "sid": [f"s{i}" for i in range(n)],
        "queued": [live_key(WS, p, "queued") for p in projects],
        "mine": [held_key(WS, p, f"s{i}") for i, p in enumerate(projects)],
        "cutoff": 5_000,
    }
    items = ["live-6", "live-7", "it-1", "missing"]
    transitions = {"ws": [WS] * n, "item": items, "sid": ["s1", "s2", "s3", "s4"], "cutoff": 5_000}
    statements = [
        (queue_ahead._PULLS_AHEAD, pulls),
        (queue_ahead._TRANSITIONS_AHEAD, transitions),
        (queue_ahead._ITEM_GUARDS_AHEAD, {"ws": [WS] * n, "key": items}),
    ]
    expected = [
        [
            "ix_sessions_stale_workers",
            "ix_work_items_live_key",
            "ix_work_items_session",
            "projects_pkey",
            "sessions_pkey",
        ],
        ["ix_sessions_stale_workers", "ix_work_items_session", "projects_pkey", "sessions_pkey", "work_items_pkey"],
        ["guards_pkey", "work_items_pkey"],
    ]

    async def check(when: str) -> None:
        for (stmt, _), index, plan in zip(statements, expected, await _generic_plans(store, statements), strict=True):
            where = (when, _sql(stmt, backend), plan)
            assert "Hash" not in plan and "Seq Scan on work_items" not in plan, where  # probes, never joins
            assert "status_order" not in plan and "ix_work_items_order" not in plan, where
            if when == "empty tables":  # every row by its own index
                assert _index_of(plan) == index and "Seq Scan" not in plan, where
            for by in (
                "ix_work_items_live_key",
                "work_items_pkey",
                "sessions_pkey",
                "guards_pkey",
                "ix_sessions_stale_workers",
            ):
                if by in index:
                    assert by in _index_of(plan), where

    await check("empty tables")
    people, queued = _queue_history()
    await store.transact(lambda conn: conn.execute(sessions.insert(), people))
    await store.transact(lambda conn: conn.execute(work_items.insert(), queued))
    guard_rows = [{"workspace": WS, "key": f"project:G{i}"} for i in range(5_000)]
    await store.transact(lambda conn: conn.execute(guards.insert(), guard_rows))
    await check("filled, before ANALYZE")
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
    await check("after ANALYZE")


async def test_a_project_s_or_a_session_s_live_leases_are_read_by_their_own_index(store: Any, backend: str) -> None:
    """The cap's count of a project's live leases (``_LIVE_LEASES``), an agent's leases in a
    project (``_AGENT_HELD``) and the issues a session holds (``_HELD_ISSUES``, a pull at the
    cap) read the leases of that project, or of that session, only: never every unreleased
    lease of the workspace through ``uq_leases_unreleased`` (workspace, issue), which SQLite
    picked for all three with 2,000 leases of another project (a pull at the cap went from
    0.5 ms to 1.1 ms, found by ``bench/history.py --tiers``)."""
    pg = backend == "postgresql"
    by_project = {"ws": WS, "project": "C", "issue": "C-0", "cutoff": 5}
    statements: list[tuple[Prepared, dict[str, Any]]] = [
        (issues_reads._LIVE_LEASES, by_project),
        (issues_reads._AGENT_HELD, {**by_project, "sid": "s1"}),
        (queue_reads._HELD_ISSUES, {"ws": WS, "sid": "s1"}),
    ]
    session = "sessions_pkey" if pg else "sqlite_autoindex_sessions_1"
    expected = [  # the indexes each may read (an agent's leases in a project: either is bounded)
        [["ix_leases_project_live", session]],
        [["ix_leases_session_live"], ["ix_leases_project_live"]],
        [["ix_leases_session_live"]],
    ]

    async def check(when: str) -> None:
        plans = await (_generic_plans(store, statements) if pg else _plans(store, statements))
        for (stmt, _), allowed, plan in zip(statements, expected, plans, strict=True):
            assert _index_of(plan) in allowed and "Seq Scan" not in plan, (when, _sql(stmt, backend), plan)

    await check("empty tables")
    people, _ = _queue_history()
    await store.transact(lambda conn: conn.execute(sessions.insert(), people))
    spread = [{**lease, "project": f"M-{i % 200}"} for i, lease in enumerate(_leases(2_000))]
    await store.transact(lambda conn: conn.execute(leases.insert(), spread))
    await check("2,000 leases of 200 other projects, before ANALYZE")
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
    await check("after ANALYZE")


async def test_the_writer_plans_its_statements_generically_from_their_first_run(store: Any, backend: str) -> None:
    """PostgreSQL: the plans these tests assert are the generic ones, and those are what the
    writer runs from a statement's first run. PostgreSQL's default planned a statement anew
    at every run while its generic plan's estimate looked dearer than its custom plans: a
    batch's end statement with its carried rows, ~0.3 ms each time (a pull in process took
    2.25 ms, 1.71 ms with this)."""
    if backend != "postgresql":
        pytest.skip("SQLite has no plan cache of this kind")
    mode = await store.transact(lambda conn: conn.exec_driver_sql("SHOW plan_cache_mode").scalar_one())
    assert mode == "force_generic_plan"


async def test_whether_a_project_leased_an_issue_is_read_by_the_issue_s_lease_alone(store: Any, backend: str) -> None:
    """The WIP cap asks whether the issue's unreleased lease is the project's
    (``_LEASED_IN_PROJECT``): through ``uq_leases_unreleased`` (workspace, issue) only, on
    an empty table, behind 5,000 unreleased leases before ANALYZE and after. With the
    project compared as ``project || ''`` (a strict operator: it implies ``project IS NOT
    NULL``, the predicate of ``ix_leases_project_live``) PostgreSQL's generic plan made
    before ANALYZE read that index by the workspace alone: every unreleased lease, 0.5 ms
    behind 5,000 (a claim in the bench's load store cost 1.15 times as much)."""
    statements = [(issues_reads._LEASED_IN_PROJECT, {"ws": WS, "issue": "LOAD-7", "project": "M"})]

    async def check(when: str) -> None:
        plans = await (_generic_plans(store, statements) if backend == "postgresql" else _plans(store, statements))
        for plan in plans:
            assert _index_of(plan) == ["uq_leases_unreleased"] and "Seq Scan" not in plan, (when, plan)

    await check("empty tables")
    await store.transact(lambda conn: conn.execute(leases.insert(), _leases(5_000)))
    await check("filled, before ANALYZE")
    await store.transact(lambda conn: conn.exec_driver_sql("ANALYZE"))
    await check("after ANALYZE")
