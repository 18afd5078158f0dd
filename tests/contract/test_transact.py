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
    # more in the pass with a savepoint per command (store/sqlite/store.py, store/postgres/writer.py,
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


def append_two(first: str, second: str, second_expected: int | None) -> Callable[[Connection], log.Pending[int]]:
    """Append to ``first`` (at its head), then to ``second`` at ``second_expected``."""

    def run(conn: Connection) -> log.Pending[int]:
        now_us, _ = dbclock.read(conn)
        meta = EventMetadata(workspace="ws")
        recorded = log.append(
            conn,
            [
                NewEvent(first, AgentHeartbeat(session_id=first), meta),
                NewEvent(second, AgentHeartbeat(session_id=second), meta),
            ],
            now_us,
            expected={second: second_expected},
        )
        return log.Pending(lambda real: real(recorded[-1].position))

    return run


def versions(conn: Connection) -> list[tuple[int, str, int]]:
    return [(e.position, e.stream, e.version) for e in log.read_wire(conn, 0, 1000)]


def heads_stored(conn: Connection) -> tuple[int, dict[str, int]]:
    """The position counter and the stream heads as the database holds them."""
    head = conn.execute(text("SELECT position FROM store_head WHERE id = 1")).scalar_one()
    rows = conn.execute(text("SELECT stream, version FROM stream_heads WHERE workspace = 'ws'")).all()
    return int(head), {str(s): int(v) for s, v in rows}


async def test_a_command_refused_after_moving_one_stream_gives_its_versions_and_positions_back(store: Any) -> None:
    """In one batch: a command moves stream a, then finds stream b at another version than it
    expects. The next command's event on a takes a's next version and the next position, and
    the heads the database keeps are the log's (SQLite moves them in memory until commit,
    ``store/sqlite/log_heads.py``; PostgreSQL at its batch's end)."""
    await store.transact(write("session:a"))
    await store.transact(write("session:b"))
    answers = await asyncio.gather(
        store.transact(write("session:a")),
        store.transact(append_two("session:a", "session:b", 5)),
        store.transact(write("session:a")),
        store.transact(append_two("session:a", "session:b", 1)),
        return_exceptions=True,
    )
    assert isinstance(answers[1], errors.ConcurrencyError)
    assert answers[0] == 3 and answers[2] == 4 and answers[3] == 6
    assert await store.query(versions) == [
        (1, "session:a", 1),
        (2, "session:b", 1),
        (3, "session:a", 2),
        (4, "session:a", 3),
        (5, "session:a", 4),
        (6, "session:b", 2),
    ]
    assert await store.query(heads_stored) == (6, {"session:a": 4, "session:b": 2})
    assert await store.head() == 6


@pytest.mark.sqlite  # PostgreSQL replicas: tests/contract/test_group_commit.py
async def test_two_sqlite_stores_on_one_file_append_after_each_other(store: Any, db_url: str) -> None:
    """Another process on the file (a second server, the CLI) appends between our batches:
    each batch reads the counter and the heads it moves afresh, under its write lock."""
    from eventcoord.store import open_store

    other = open_store(db_url)
    await other.start()
    try:
        for i in range(3):
            mine, theirs = await store.transact(write("session:s")), await other.transact(write("session:s"))
            assert (mine, theirs) == (2 * i + 1, 2 * i + 2)
        both = await asyncio.gather(*(s.transact(write("session:s")) for s in (store, other, store, other)))
        assert sorted(both) == [7, 8, 9, 10]
        assert [v for _, _, v in await other.query(versions)] == list(range(1, 11))
        assert await store.query(heads_stored) == (10, {"session:s": 10})
    finally:
        await other.close()


@pytest.mark.sqlite
async def test_a_stream_head_another_connection_moved_is_read_again(store: Any, db_url: str) -> None:
    """The writer keeps the heads its last batch committed (``log_heads.KnownHeads``) only
    while no other connection committed: here one moves a head and not the counter."""
    assert [await store.transact(write("session:s")) for _ in range(2)] == [1, 2]
    other = sqlite3.connect(db_url.split("///", 1)[1])
    other.execute("UPDATE stream_heads SET version = 5 WHERE stream = 'session:s'")
    other.commit()
    other.close()
    assert await store.transact(write("session:s")) == 3
    assert [v for _, _, v in await store.query(versions)] == [1, 2, 6]
    assert await store.query(heads_stored) == (3, {"session:s": 6})


@pytest.mark.sqlite
async def test_a_log_written_on_the_writer_s_own_connection_is_read_again(store: Any) -> None:
    """A job that writes the log's tables itself on the writer's connection (as
    ``eventcoord replay`` does) moves the counter: the next batch finds it elsewhere than
    the last batch left it and reads the heads afresh, those it does not touch included."""
    assert [await store.transact(write(s)) for s in ("session:s", "session:s", "session:o")] == [1, 2, 3]

    def load(position: int, stream: str, version: int) -> Callable[[Connection], None]:
        def run(conn: Connection) -> None:
            conn.execute(
                text(
                    "INSERT INTO events (position, workspace, stream, version, type, data, metadata, recorded_us) "
                    f"VALUES ({position}, 'ws', '{stream}', {version}, 'AgentHeartbeat', '{{}}', '{{}}', 0)"
                )
            )
            conn.execute(text(f"UPDATE stream_heads SET version = {version} WHERE stream = '{stream}'"))
            conn.execute(text(f"UPDATE store_head SET position = {position} WHERE id = 1"))

        return run

    await store.transact(load(4, "session:o", 2))
    assert await store.transact(write("session:s")) == 5
    assert await store.transact(write("session:o")) == 6
    assert [(p, s, v) for p, s, v in await store.query(versions)][-3:] == [
        (4, "session:o", 2),
        (5, "session:s", 3),
        (6, "session:o", 3),
    ]
    assert await store.query(heads_stored) == (6, {"session:s": 3, "session:o": 3})

    # In one batch with it, the appends after it go on from what it wrote.
    _, mine = await asyncio.gather(store.transact(load(10, "session:s", 5)), store.transact(write("session:s")))
    assert mine == 11
    assert [(p, v) for p, _, v in await store.query(versions)][-2:] == [(10, 5), (11, 6)]
    assert await store.query(heads_stored) == (11, {"session:s": 6, "session:o": 3})


@pytest.mark.sqlite
async def test_the_heads_a_writer_keeps_between_batches_are_bounded(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eventcoord.store.sqlite import log_heads

    monkeypatch.setattr(log_heads, "KNOWN_MAX", 3)
    for i in range(8):
        await store.transact(write(f"session:{i % 5}"))
        assert len(store._known.versions) <= 3
    assert [v for _, _, v in await store.query(versions)] == [1, 1, 1, 1, 1, 2, 2, 2]
