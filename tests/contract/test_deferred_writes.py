"""Deferred read-model writes: sent together, later, as if sent in order.

On PostgreSQL ``Prepared.write`` keeps a command's read-model writes and sends them as one
statement, in front of the batch's next statement or alone before it when they touch what
it reads (store/prepared.py); on SQLite it writes at once. On both, what a command sees and what commits must be what
the writes in order would give, and a write that fails fails its own command only.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from eventcoord.errors import ConcurrencyError
from eventcoord.projections.tables import project_leases
from eventcoord.store.prepared import Prepared
from eventcoord.store.schema import guards

_GUARD = Prepared(lambda d: insert(guards).values(workspace=bindparam("ws"), key=bindparam("key")))


def _count_up(dialect: str) -> Any:
    upsert = pg_insert if dialect == "postgresql" else sqlite_insert
    stmt = upsert(project_leases).values(workspace=bindparam("ws"), project=bindparam("project"), unreleased=1)
    return stmt.on_conflict_do_update(
        index_elements=["workspace", "project"], set_={"unreleased": project_leases.c.unreleased + 1}
    )


_COUNT_UP = Prepared(_count_up)
_COUNT = Prepared(
    lambda d: select(project_leases.c.unreleased).where(
        (project_leases.c.workspace == bindparam("ws")) & (project_leases.c.project == bindparam("project"))
    )
)
_GUARDS = Prepared(lambda d: select(guards.c.key).where(guards.c.workspace == bindparam("ws")).order_by(guards.c.key))


async def counts(store: Any, project: str) -> Any:
    return await store.query(lambda c: _COUNT.scalar(c, {"ws": "ws", "project": project}))


async def test_writes_to_one_row_apply_in_order_and_a_later_read_sees_them(store: Any) -> None:
    # Two upserts of one row in one statement would fail on PostgreSQL ("cannot affect row
    # a second time"): the second must send the first before it is kept.
    def run(conn: Connection) -> tuple[Any, Any, list[str]]:
        _COUNT_UP.write(conn, {"ws": "ws", "project": "p"})
        _GUARD.write(conn, {"ws": "ws", "key": "a"})
        _COUNT_UP.write(conn, {"ws": "ws", "project": "p"})
        _COUNT_UP.write(conn, {"ws": "ws", "project": "q"})
        seen = _COUNT.scalar(conn, {"ws": "ws", "project": "p"})  # a prepared read sends them first
        _COUNT_UP.write(conn, {"ws": "ws", "project": "p"})
        _GUARD.write(conn, {"ws": "ws", "key": "b"})
        # ... and so does a statement SQLAlchemy runs.
        again = conn.execute(select(project_leases.c.unreleased).where(project_leases.c.project == "p")).scalar()
        return seen, again, [k for (k,) in _GUARDS.rows(conn, {"ws": "ws"})]

    assert await store.transact(run) == (2, 3, ["a", "b"])
    assert await counts(store, "p") == 3
    assert await counts(store, "q") == 1


async def test_a_deferred_write_that_fails_fails_only_its_own_command(store: Any) -> None:
    await store.transact(lambda c: _GUARD.write(c, {"ws": "ws", "key": "taken"}))

    def claim(i: int) -> Any:
        def run(conn: Connection) -> int:
            _COUNT_UP.write(conn, {"ws": "ws", "project": f"p{i}"})
            # Every third command writes a key that exists: on PostgreSQL it fails when the
            # command's writes are sent, after the command's own code returned.
            _GUARD.write(conn, {"ws": "ws", "key": "taken" if i % 3 == 1 else f"k{i}"})
            return i

        return run

    results = await asyncio.gather(*(store.transact(claim(i), retry=False) for i in range(9)), return_exceptions=True)
    failed = [i for i, r in enumerate(results) if isinstance(r, ConcurrencyError)]
    assert failed == [1, 4, 7], results
    assert [r for r in results if isinstance(r, int)] == [0, 2, 3, 5, 6, 8]
    for i in range(9):  # a failed command's other write is gone with it; the others stay
        assert await counts(store, f"p{i}") == (None if i in failed else 1)
    keys = await store.query(lambda c: [k for (k,) in _GUARDS.rows(c, {"ws": "ws"})])
    assert keys == sorted(["taken", *(f"k{i}" for i in range(9) if i not in failed)])


async def test_a_command_that_raises_leaves_no_deferred_write_behind(store: Any) -> None:
    class Refused(Exception):
        pass

    def refuse(conn: Connection) -> None:
        _COUNT_UP.write(conn, {"ws": "ws", "project": "never"})
        raise Refused

    def after(conn: Connection) -> Any:
        return _COUNT.scalar(conn, {"ws": "ws", "project": "never"})

    results = await asyncio.gather(
        *(store.transact(refuse if i % 2 else after, retry=False) for i in range(8)), return_exceptions=True
    )
    assert all(isinstance(r, Refused) for r in results[1::2])
    assert results[0::2] == [None] * 4
    assert await counts(store, "never") is None
