"""The contract of ``EventStore.transact``: what commits, what rolls back, what runs again.

``transact`` is the one seam every command passes through; these tests hold each backend
to its docstring (store/base.py) with real databases: a refusal rolls back all it wrote,
SQLite's group commit never lets one command's failure sink its neighbours, and a race
lost inside PostgreSQL is run again and decided on what the winner committed.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Connection, func, insert, select, text, update

from eventcoord import errors
from eventcoord.codec import EventMetadata
from eventcoord.errors import DomainError
from eventcoord.events import AgentHeartbeat
from eventcoord.store import dbclock, log
from eventcoord.store.log import NewEvent
from eventcoord.store.schema import settings


def write(stream: str) -> Callable[[Connection], log.Pending[int]]:
    """Append one event to ``stream``; ``transact`` answers its committed position."""

    def run(conn: Connection) -> log.Pending[int]:
        now_us, _ = dbclock.read(conn)
        [recorded] = log.append(
            conn, [NewEvent(stream, AgentHeartbeat(session_id=stream), EventMetadata(workspace="ws"))], now_us
        )
        return log.Pending(lambda real: real(recorded.position))

    return run


def write_then_fail(stream: str, failure: Exception) -> Callable[[Connection], log.Pending[int]]:
    """Append one event, change a setting, then fail: nothing of it may stay."""

    def run(conn: Connection) -> log.Pending[int]:
        write(stream)(conn)
        conn.execute(update(settings).where(settings.c.key == "ttl_seconds").values(value="7"))
        raise failure

    return run


def streams(conn: Connection) -> list[str]:
    return [e.stream for e in log.read_wire(conn, 0, 1000)]


async def test_a_domain_error_rolls_back_everything_it_wrote(store: Any) -> None:
    await store.transact(write("a"))
    runs: list[int] = []

    def refuse_after_writing(conn: Connection) -> log.Pending[int]:
        runs.append(1)
        return write_then_fail("b", errors.session_not_found("b"))(conn)

    with pytest.raises(DomainError) as refused:
        await store.transact(refuse_after_writing)
    assert refused.value.code == "NOT_FOUND"
    assert await store.query(streams) == ["a"]
    ttl = await store.query(
        lambda c: c.execute(select(settings.c.value).where(settings.c.key == "ttl_seconds")).scalar_one()
    )
    assert ttl == "120"
    # A refusal is an answer, not a race: it is never retried as one. Both group commits
    # undo a write by abandoning their fast pass (no savepoints) and decide the command once
    # more in the pass with a savepoint per command (store/sqlite.py, store/pg_writer.py,
    # "Failures"): twice, and no more.
    assert runs == [1, 1]
    # No position was lost.
    assert await store.transact(write("c")) == 2
    assert await store.query(streams) == ["a", "c"]


@pytest.mark.sqlite  # PostgreSQL's batch has its own contract test (tests/contract/test_group_commit.py)
@pytest.mark.parametrize("failure", [errors.session_not_found("x"), RuntimeError("a bug")], ids=["refusal", "bug"])
async def test_a_failed_command_in_a_sqlite_batch_leaves_its_neighbours_committed(
    store: Any, db_url: str, failure: Exception
) -> None:
    path = db_url.split("///", 1)[1]
    shared: list[bool] = []

    def last_in_the_batch(conn: Connection) -> log.Pending[int]:
        # Same transaction as "first": its event is visible here, but not yet to another
        # connection. This proves the commands really were committed as one batch.
        inside = streams(conn)
        outside = sqlite3.connect(path)
        try:
            committed = [row[0] for row in outside.execute("SELECT stream FROM events")]
        finally:
            outside.close()
        shared.append("first" in inside and "first" not in committed)
        return write("last")(conn)

    def refuse_before_writing(conn: Connection) -> log.Pending[int]:
        raise errors.session_not_found("early")

    answers = await asyncio.gather(
        store.transact(write("first")),
        store.transact(write_then_fail("failed", failure)),
        store.transact(refuse_before_writing),
        store.transact(last_in_the_batch),
        return_exceptions=True,
    )
    assert shared and all(shared)
    assert answers[0] == 1 and answers[3] == 2
    assert answers[1] is failure
    assert isinstance(answers[2], DomainError) and answers[2].details == {"session_id": "early"}
    assert await store.query(streams) == ["first", "last"]
    assert await store.head() == 2
    ttl = await store.query(
        lambda c: c.execute(select(settings.c.value).where(settings.c.key == "ttl_seconds")).scalar_one()
    )
    assert ttl == "120"


@pytest.mark.postgres
async def test_a_race_lost_in_postgresql_is_run_again_and_decided_on_the_winner(store: Any, db_url: str) -> None:
    """Two replicas (two stores on one database) both read "no claims yet" and insert the
    same key; the loser's unique violation is retried, and its second run sees the
    winner's row and decides differently. (Within one replica the group commit runs the
    two in one transaction, one after the other, so the race needs a second replica.)"""
    from eventcoord.store import open_store

    other = open_store(db_url)
    await other.start()
    reads: list[int] = []

    def take_next_slot(conn: Connection) -> str:
        taken = conn.execute(
            select(func.count()).select_from(settings).where(settings.c.key.like("slot-%"))
        ).scalar_one()
        reads.append(taken)
        for _ in range(2000):  # hold (≤ ~10 s) until the other replica has read the same count
            if len(reads) >= 2:
                break
            conn.execute(text("SELECT pg_sleep(0.005)"))
        key = f"slot-{taken}"
        conn.execute(insert(settings).values(key=key, value="x"))
        return key

    try:
        keys = await asyncio.gather(store.transact(take_next_slot), other.transact(take_next_slot))
        assert sorted(keys) == ["slot-0", "slot-1"]
        assert reads == [0, 0, 1]  # two first runs, then the loser decided again
        rows = await store.query(
            lambda c: c.execute(select(settings.c.key).where(settings.c.key.like("slot-%"))).scalars().all()
        )
        assert sorted(rows) == ["slot-0", "slot-1"]

        # Without retry the lost race is a ConcurrencyError, and nothing of it is kept.
        reads.clear()
        outcome = await asyncio.gather(
            store.transact(take_next_slot, retry=False),
            other.transact(take_next_slot, retry=False),
            return_exceptions=True,
        )
        assert sorted(o for o in outcome if isinstance(o, str)) == ["slot-2"]
        assert [type(o).__name__ for o in outcome if not isinstance(o, str)] == ["ConcurrencyError"]
        assert reads == [2, 2]
    finally:
        await other.close()
