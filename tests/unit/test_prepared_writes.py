"""Which statements may write: a PostgreSQL batch renumbers its positions only in the tables written."""

from __future__ import annotations

from typing import Any

import pytest

from eventcoord.store.postgres.writer import end_statement
from eventcoord.store.prepared import writes_sql


@pytest.mark.parametrize(
    ("sql", "writes"),
    [
        ("SELECT sessions.session_id FROM sessions WHERE sessions.session_id = $1 FOR UPDATE", False),
        ("SELECT name FROM workspaces WHERE name = $1 FOR NO KEY UPDATE", False),
        ("SELECT updated_us, update_count FROM work_items", False),
        ("UPDATE sessions SET last_seen_us = $1 WHERE session_id = $2", True),
        ("WITH guard AS (INSERT INTO guards VALUES ($1, $2) ON CONFLICT DO NOTHING) SELECT 1", True),
        ("with w0 as (delete from waits where position = $1) select 1", True),
        ("INSERT INTO events (position) VALUES ($1)", True),
    ],
)
def test_a_statement_writes_when_its_text_says_so(sql: str, writes: bool) -> None:
    assert writes_sql(sql) is writes


def test_the_end_statement_renumbers_the_tables_it_is_given() -> None:
    every = end_statement()
    assert "UPDATE leases SET lease_id" in every and "UPDATE waits SET position" in every
    leases_only = end_statement(frozenset({"leases", "sessions"}))
    assert "UPDATE leases SET lease_id" in leases_only and "UPDATE waits" not in leases_only
    none = end_statement(frozenset())
    assert "UPDATE leases" not in none and "$9::bigint, $10::bigint" in none


def test_a_statement_s_own_ctes_are_lifted_in_front_of_it() -> None:
    from eventcoord.store.postgres.statements import _split_with

    ctes, body = _split_with("WITH x AS (SELECT '(' || E'\\x01)' || 'it''s)' FROM t), y AS (SELECT 1) SELECT * FROM x")
    assert ctes == [("x", "x AS (SELECT '(' || E'\\x01)' || 'it''s)' FROM t)"), ("y", "y AS (SELECT 1)")]
    assert body == "SELECT * FROM x"
    assert _split_with("UPDATE t SET a = 1") == ([], "UPDATE t SET a = 1")
    # shapes it does not read are left whole (the writes are then sent alone)
    assert _split_with("WITH x(a) AS (SELECT 1) SELECT a FROM x") is None
    assert _split_with("WITH x AS MATERIALIZED (SELECT 1) SELECT * FROM x") is None
    assert _split_with("WITH x AS (SELECT 1 SELECT * FROM x") is None


def test_writes_with_ctes_of_their_own_combine_unless_the_names_clash() -> None:
    from sqlalchemy import select, text

    from eventcoord.projections.leases import _RELEASE_COUNTED
    from eventcoord.projections.tables import sessions
    from eventcoord.store.postgres.statements import _combined
    from eventcoord.store.prepared import Prepared

    release = _RELEASE_COUNTED._asyncpg()
    read = Prepared(lambda d: select(sessions.c.session_id).where(sessions.c.session_id == "x"))._asyncpg()
    sql = _combined([release], read)
    assert sql is not None
    # the release's CTE first, then the write that reads it, then the read; one WITH
    assert sql.startswith("WITH released AS") and sql.count("WITH ") == 1
    assert sql.index("released AS") < sql.index("deferred_0 AS") < sql.index("SELECT sessions.session_id")
    clash = Prepared(lambda d: text("WITH released AS (SELECT 1) SELECT * FROM released"))._asyncpg()
    assert _combined([release], clash) is None


def test_a_deferred_write_goes_with_a_statement_only_where_their_rows_differ() -> None:
    from eventcoord.projections.leases import _RELEASE_COUNTED
    from eventcoord.projections.sessions import _SIGN_OF_LIFE
    from eventcoord.reads.issues import _RELEASE_PEEK
    from eventcoord.store.postgres.deferred_writes import DeferredWrites

    release, sign, peek = _RELEASE_COUNTED._asyncpg(), _SIGN_OF_LIFE._asyncpg(), _RELEASE_PEEK._asyncpg()
    released = (release, [], release.keys({"ws": "w", "issue": "P-1", "at": 1, "reason": "released"}))
    signed = (sign, [], sign.keys({"sid": "s1", "seen": 1}))
    other = peek.keys({"ws": "w", "issue": "P-2", "sid": "s2"})
    assert DeferredWrites([released, signed]).apart(peek, other)
    # the same lease, or the same session, must be read after the write
    assert not DeferredWrites([released]).apart(peek, peek.keys({"ws": "w", "issue": "P-1", "sid": "s2"}))
    assert not DeferredWrites([signed]).apart(peek, peek.keys({"ws": "w", "issue": "P-2", "sid": "s1"}))
    # a statement that names no rows shares the tables whole
    assert not DeferredWrites([released]).apart(peek, None)


def test_a_claim_s_reads_take_the_last_claim_s_writes_and_signs_of_life_of_others_only() -> None:
    """A claim's one statement (after its project's guard is held) reads other sessions only
    for their liveness, counting the pending signs of life: a sign of life of another
    session may go with it, no other write of ``sessions`` (an end, a declaration) may."""
    from eventcoord.projections.leases import _COUNT_UNRELEASED, _INSERT_LEASE, _UPSERT_ISSUE
    from eventcoord.projections.sessions import _END, _HEARTBEAT, _SIGN_OF_LIFE
    from eventcoord.projections.waits import _LEAVE_LINE
    from eventcoord.reads.issues import _SESSION_AND_CLAIM_READS
    from eventcoord.store.postgres.deferred_writes import DeferredWrites

    reads = _SESSION_AND_CLAIM_READS._asyncpg()
    mine = reads.keys({"ws": "w", "project": "B", "issue": "B-1", "sid": "s2"})

    def deferred(prepared: Any, **params: Any) -> tuple[Any, list[Any], Any]:
        pg = prepared._asyncpg()
        return (pg, [], pg.keys(params))

    claimed = [
        deferred(_UPSERT_ISSUE, ws="w", issue="A-1"),
        deferred(_INSERT_LEASE, ws="w", issue="A-1"),
        deferred(_COUNT_UNRELEASED, ws="w", project="A"),
        deferred(_LEAVE_LINE, ws="w", key="A-1"),
        deferred(_SIGN_OF_LIFE, sid="s1"),
    ]
    assert DeferredWrites(claimed).apart(reads, mine)
    # the same issue, project or line, or the caller's own sign of life: after the write
    assert not DeferredWrites([deferred(_INSERT_LEASE, ws="w", issue="B-1")]).apart(reads, mine)
    assert not DeferredWrites([deferred(_COUNT_UNRELEASED, ws="w", project="B")]).apart(reads, mine)
    assert not DeferredWrites([deferred(_LEAVE_LINE, ws="w", key="B-1")]).apart(reads, mine)
    assert not DeferredWrites([deferred(_SIGN_OF_LIFE, sid="s2")]).apart(reads, mine)
    # another session's end or heartbeat may change who declared working on the issue
    assert not DeferredWrites([deferred(_END, sid="s1")]).apart(reads, mine)
    assert not DeferredWrites([deferred(_HEARTBEAT, sid="s1")]).apart(reads, mine)
