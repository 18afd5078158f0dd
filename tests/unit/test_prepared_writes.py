"""Which statements may write: a PostgreSQL batch renumbers its positions only in the tables written."""

from __future__ import annotations

import pytest

from eventcoord.store.pg_writer import end_statement
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
