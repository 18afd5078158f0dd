"""PostgreSQL: the batch's carried liveness, written as one statement over arrays with its
end statement, leaves the rows the per-session statements leave (``sessions.Liveness``)."""

from __future__ import annotations

from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import Connection, select

from eventcoord.codec import EventMetadata
from eventcoord.events import AgentHeartbeat, Event, MessagePosted
from eventcoord.projections.sessions import Liveness
from eventcoord.projections.tables import sessions
from eventcoord.store.log import RecordedEvent

T = 1_000_000_000


def recorded(event: Event, sid: str, at: int) -> RecordedEvent:
    meta = EventMetadata(workspace="default", session_id=sid, actor_key=f"a-{sid}")
    return RecordedEvent(position=1, stream=sid, version=1, event=event, metadata=meta, recorded_us=at)


def fold(prefix: str) -> Liveness:
    """Every shape a session's pending liveness takes, one session each."""
    live = Liveness()
    live.heartbeat(recorded(AgentHeartbeat(session_id=f"{prefix}0"), f"{prefix}0", T + 5))
    live.heartbeat(recorded(AgentHeartbeat(session_id=f"{prefix}0"), f"{prefix}0", T + 6))
    live.heartbeat(recorded(AgentHeartbeat(session_id=f"{prefix}1", working_on="X-1"), f"{prefix}1", T + 5))
    live.heartbeat(recorded(AgentHeartbeat(session_id=f"{prefix}2", working_on=None), f"{prefix}2", T + 5))
    for i, at in ((3, T + 9), (4, T - 100), (6, T + 9)):  # newer, older, on an ended session
        sid = f"{prefix}{i}"
        live.sign_of_life(recorded(MessagePosted(channel="c", body="b", session_id=sid, actor_key="a"), sid, at))
    live.heartbeat(recorded(AgentHeartbeat(session_id=f"{prefix}5"), f"{prefix}5", T + 5))
    sid = f"{prefix}5"  # a sign of life after a heartbeat, and one before it is overwritten
    live.sign_of_life(recorded(MessagePosted(channel="c", body="b", session_id=sid, actor_key="a"), sid, T + 7))
    return live


async def test_the_carried_statement_writes_what_the_per_session_statements_write(
    store: Any, backend: str, db_url: str
) -> None:
    if backend != "postgresql":
        pytest.skip("the carried liveness is PostgreSQL's batch")

    def seed(conn: Connection) -> None:
        for prefix in ("a", "b"):
            for i in range(7):
                conn.execute(
                    sessions.insert().values(
                        session_id=f"{prefix}{i}",
                        workspace="default",
                        actor_key=f"a-{prefix}{i}",
                        kind="agent",
                        stable=True,
                        identity_source="test",
                        registered_us=T - 1000,
                        heartbeats=0,
                        last_seen_us=T,
                        ended_us=T if i == 6 else None,
                        working_on="Y-1" if i in (1, 2) else None,
                    )
                )

    await store.transact(seed)
    await store.transact(lambda conn: fold("a").flush(conn))  # the per-session statements
    sql, args = fold("b").as_arrays()
    raw = await asyncpg.connect(db_url.replace("+asyncpg", ""))
    try:
        assert await raw.execute(sql, *args) == "UPDATE 7"
    finally:
        await raw.close()

    def rows(conn: Connection) -> dict[str, dict[str, tuple[Any, ...]]]:
        out: dict[str, dict[str, tuple[Any, ...]]] = {"a": {}, "b": {}}
        cols = (sessions.c.heartbeats, sessions.c.last_seen_us, sessions.c.working_on, sessions.c.ended_us)
        for sid, *values in conn.execute(select(sessions.c.session_id, *cols)):
            out[sid[0]][sid[1:]] = tuple(values)
        return out

    got = await store.query(rows)
    assert got["b"] == got["a"], got
    assert got["a"]["0"] == (2, T + 6, None, None) and got["a"]["1"][2] == "X-1" and got["a"]["2"][2] is None
    assert got["a"]["5"][1] == T + 7 and got["a"]["4"][1] == T and got["a"]["6"][1] == T
