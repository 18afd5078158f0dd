"""The event-store contract, run against every backend."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text

from eventcoord.errors import ConcurrencyError
from eventcoord.events import AgentHeartbeat, AgentRegistered
from eventcoord.store import dbclock


def hb(sid: str = "s") -> AgentHeartbeat:
    return AgentHeartbeat(session_id=sid)


async def test_positions_start_at_one_and_versions_follow_the_stream(store: Any) -> None:
    first = await store.append("ws", "session:a", 0, [hb("a"), hb("a")])
    second = await store.append("ws", "session:b", 0, [hb("b")])
    third = await store.append("ws", "session:a", 2, [hb("a")])
    assert [r.position for r in first + second + third] == [1, 2, 3, 4]
    assert [(r.stream, r.version) for r in first + second + third] == [
        ("session:a", 1),
        ("session:a", 2),
        ("session:b", 1),
        ("session:a", 3),
    ]
    assert await store.head() == 4


async def test_stale_expected_version_raises_concurrency_error_and_leaves_no_hole(store: Any) -> None:
    await store.append("ws", "session:a", 0, [hb("a")])
    with pytest.raises(ConcurrencyError):
        await store.append("ws", "session:a", 0, [hb("a")])
    with pytest.raises(ConcurrencyError):
        await store.append("ws", "session:a", 5, [hb("a")])
    after = await store.append("ws", "session:a", 1, [hb("a")])
    # The lost races gave their positions back: the next append is contiguous.
    assert [r.position for r in after] == [2]
    assert [e.position for e in await store.read()] == [1, 2]


async def test_read_pages_by_position_and_filters_by_workspace(store: Any) -> None:
    for i in range(5):
        await store.append("ws1" if i % 2 == 0 else "ws2", f"session:{i}", None, [hb(str(i))])
    assert [e.position for e in await store.read(after=1, limit=2)] == [2, 3]
    assert [e.position for e in await store.read(workspace="ws1")] == [1, 3, 5]
    page = await store.read(after=0, limit=1)
    assert page[0].type == "AgentHeartbeat" and page[0].stream == "session:0"


async def test_concurrent_writers_and_a_tailing_reader_see_every_event_once_in_order(store: Any) -> None:
    writers, per_writer = 8, 40
    done = asyncio.Event()
    seen: list[int] = []

    async def write(w: int) -> None:
        for i in range(per_writer):
            # Mix single and double appends, half of them on a shared contended stream.
            stream = "session:shared" if i % 2 else f"session:w{w}"
            await store.append("ws", stream, None, [hb(f"{w}-{i}")] * (1 + i % 2))

    async def tail() -> None:
        after = 0
        while True:
            finished = done.is_set()
            page = await store.read(after=after, limit=50)
            for e in page:
                seen.append(e.position)
            if page:
                after = page[-1].position
            elif finished:
                return
            else:
                await asyncio.sleep(0.001)

    reader = asyncio.create_task(tail())
    await asyncio.gather(*(write(w) for w in range(writers)))
    done.set()
    await reader
    total = sum(1 + i % 2 for i in range(per_writer)) * writers
    # Exactly once, in position order, with no gap a late commit could have hidden.
    assert seen == list(range(1, total + 1))
    assert await store.head() == total


async def test_concurrent_expected_version_appends_have_exactly_one_winner(store: Any) -> None:
    await store.append("ws", "session:x", 0, [hb("x")])

    async def attempt() -> bool:
        try:
            await store.append("ws", "session:x", 1, [hb("x")])
            return True
        except ConcurrencyError:
            return False

    results = await asyncio.gather(*(attempt() for _ in range(10)))
    assert results.count(True) == 1
    assert [e.position for e in await store.read()] == [1, 2]


async def test_events_round_trip_through_the_codec(store: Any) -> None:
    ev = AgentRegistered(session_id="s1", actor_key="alice", identity_source="explicit-override", stable=True, host="h")
    await store.append("ws", "session:s1", 0, [ev], actor_key="alice", session_id="s1", command_id="c1")
    wire = (await store.read())[0]
    import msgspec

    data = msgspec.json.decode(wire.data)
    meta = msgspec.json.decode(wire.metadata)
    assert data["actor_key"] == "alice" and "type" not in data
    assert meta == {"workspace": "ws", "actor_key": "alice", "session_id": "s1", "command_id": "c1"}
    assert wire.recorded_at.endswith("Z")


@pytest.mark.postgres
async def test_postgres_events_table_refuses_update_and_delete(store: Any) -> None:
    from eventcoord.errors import StoreError

    await store.append("ws", "session:a", 0, [hb("a")])
    for sql in ("UPDATE events SET type = 'X'", "DELETE FROM events"):
        with pytest.raises(StoreError, match="immutable"):
            await store.transact(lambda c, sql=sql: c.execute(text(sql)), retry=False)
    assert [e.type for e in await store.read()] == ["AgentHeartbeat"]


async def test_the_ttl_is_cached_per_database_connection(store: Any, tmp_path: Any) -> None:
    """Each database answers its own TTL, re-read after this process wrote it."""
    from sqlalchemy import Connection, update

    from eventcoord.store import open_store
    from eventcoord.store.schema import settings

    def set_ttl(seconds: int) -> Any:
        def run(conn: Connection) -> None:
            dbclock.read(conn)  # cache the old value on this connection first
            conn.execute(update(settings).where(settings.c.key == "ttl_seconds").values(value=str(seconds)))
            dbclock.forget_ttl(conn)

        return run

    def ttl(conn: Connection) -> int:
        return dbclock.read(conn)[1]

    other = open_store(f"sqlite+aiosqlite:///{tmp_path}/other.db")
    await other.start()
    await other.migrate()
    try:
        await store.transact(set_ttl(5))
        assert await store.transact(ttl) == 5
        assert await other.transact(ttl) == 120
        await other.transact(set_ttl(9))
        assert await other.transact(ttl) == 9
        assert await store.transact(ttl) == 5
    finally:
        await other.close()
