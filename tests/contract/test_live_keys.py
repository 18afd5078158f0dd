"""Each live key's expression, evaluated by the real database, equals its Python twin.

For every key of ``projections/keys.py`` and every combination of sample column values
(released or not, each status, waiting or ready, held or free, with or without an issue,
a quote and a non-ASCII character in the text), the database computes the key over a row
of those values (as the expression the index holds, and on PostgreSQL also as the text the
text statements embed) and the twin computes it in Python: they must agree, NULL for NULL.
"""

from __future__ import annotations

import itertools
from typing import Any

from sqlalchemy import Connection, cast, literal, literal_column, select, union_all

from eventcoord.projections import keys
from eventcoord.store.schema import metadata

#: Sample values of every column a key reads.
SAMPLES: dict[str, tuple[Any, ...]] = {
    "released_us": (None, 5),
    "ended_us": (None, 7),
    "workspace": ("w", "it's-ü"),
    "literal_prefix": ("", "src/a/", "x/ü'"),
    "issue": (None, "I-1"),
    "project": ("P", "p'q"),
    "status": ("queued", "claimed", "running", "done", "cancelled"),
    "waiting_on": (0, 2),
    "held_by": (None, "s-1"),
    "working_on": (None, "I-2"),
    "active_items": (0, 1, 3),
    "kind": ("agent", "human"),
}


def _rows(key: keys.LiveKey) -> list[dict[str, Any]]:
    values = [SAMPLES[c] for c in key.columns]
    rows = [dict(zip(key.columns, combo, strict=True)) for combo in itertools.product(*values)]
    if key is keys.CLAIM_ISSUE:  # a claim always has an issue
        rows = [r for r in rows if r["issue"] is not None]
    return rows


def _evaluated(conn: Connection, key: keys.LiveKey, rows: list[dict[str, Any]]) -> list[Any]:
    """(row number, the key as the expression, as the text) for each row, computed by the database."""
    table = metadata.tables[key.table]
    per_row = []
    for n, row in enumerate(rows):
        columns = [literal(n).label("n")] + [
            cast(literal(v, table.c[c].type), table.c[c].type).label(c) for c, v in row.items()
        ]
        per_row.append(select(*columns))
    r = union_all(*per_row).subquery("r")
    as_text = literal_column(key.sql("r")) if conn.dialect.name == "postgresql" else key.of(r)
    return list(conn.execute(select(r.c.n, key.of(r), as_text).order_by(r.c.n)))


async def test_each_key_equals_its_twin_in_the_database(store: Any) -> None:
    for key in keys.KEYS:
        rows = _rows(key)
        got = await store.query(lambda c, key=key, rows=rows: _evaluated(c, key, rows))
        assert len(got) == len(rows)
        assert {e is None for _, e, _ in got} == {True, False}, key.index  # live rows and others
        for (n, expression, as_text), row in zip(got, rows, strict=True):
            twin = key.twin(**row)
            assert (expression, as_text) == (twin, twin), (key.index, n, row)


async def test_the_prefix_key_in_order_is_the_key_in_code_point_order(store: Any) -> None:
    # The probes' bounds are built in Python (code point order): the key they compare must
    # sort the same way in the database, whatever the database's collation.
    prefixes = ["a/", "a/b/", "B/", "b/", "é/", "z/", "\U0001f600/", "a\x01", "a0/"]
    rows = [{"released_us": None, "workspace": "w", "literal_prefix": p} for p in prefixes]

    def order(conn: Connection) -> list[str]:
        table = metadata.tables["file_claims"]
        per_row = [
            select(*(cast(literal(v, table.c[c].type), table.c[c].type).label(c) for c, v in row.items()))
            for row in rows
        ]
        r = union_all(*per_row).subquery("r")
        ordered = keys.claim_prefix_in_order(r) if conn.dialect.name == "postgresql" else keys.CLAIM_PREFIX.of(r)
        return list(conn.execute(select(r.c.literal_prefix).order_by(ordered)).scalars())

    assert await store.query(order) == sorted(prefixes)


def test_the_values_statements_compare_are_the_twins_of_live_rows() -> None:
    assert keys.claim_prefix_key("w", "a/") == keys.CLAIM_PREFIX.twin(None, "w", "a/") == "w\x01a/"
    assert keys.claim_issue_key("w", "I") == keys.CLAIM_ISSUE.twin(None, "w", "I") == "w\x01I"
    assert keys.work_live_key("w", "P", "queued") == keys.WORK_LIVE.twin("queued", 0, None, "w", "P")
    assert keys.work_live_key("w", "P", "active") == keys.WORK_LIVE.twin("running", 0, None, "w", "P")
    assert keys.work_held_key("w", "P", "s") == keys.WORK_LIVE.twin("queued", 0, "s", "w", "P") == "w\x01P\x01held\x01s"
    assert keys.work_queued_issue_key("w", "P", None) == keys.WORK_QUEUED_ISSUE.twin("queued", 0, "w", "P", None)
    assert keys.work_on_issue_key("w", "I") == keys.WORK_ON_ISSUE.twin("queued", "I", "w") == "w\x01I"
    assert keys.declaring_key("w", "I") == keys.DECLARING.twin(None, "w", "I") == "w\x01I"
