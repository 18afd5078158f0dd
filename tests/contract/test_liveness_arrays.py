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


async def test_the_carried_statements_probe_each_session_by_its_key_whatever_the_statistics(
    store: Any, backend: str, db_url: str
) -> None:
    """The carried liveness, with the counts of items in work and without, and the counts
    alone, find each row by a probe of its key, then by its position: on an empty table,
    filled (3,000 sessions) before ANALYZE and after. Joined by the key, the generic plan
    made before ANALYZE hashed the whole table: a heartbeat with 3,000 more sessions cost
    1.3 times as much (``bench/history.py --tiers``)."""
    if backend != "postgresql":
        pytest.skip("the carried statements are PostgreSQL's batch")
    from eventcoord.projections import sessions as sessions_projection

    statements = {
        "liveness": (sessions_projection._LIVENESS_ARRAYS, 6),
        "liveness and work": (sessions_projection._LIVENESS_AND_WORK_ARRAYS, 7),
        "work": (sessions_projection.WORK_ARRAYS, 2),
    }
    raw = await asyncpg.connect(db_url.replace("+asyncpg", ""))
    try:
        await raw.execute("SET plan_cache_mode = force_generic_plan")

        async def check(when: str) -> None:
            for name, (sql, n) in statements.items():
                plan = "\n".join(r[0] for r in await raw.fetch(f"EXPLAIN (COSTS OFF) {sql}", *([None] * n)))
                where = (when, name, plan)
                assert "Seq Scan" not in plan and "Hash" not in plan, where
                assert "Index Scan using sessions_pkey" in plan and "Tid Scan on sessions" in plan, where

        await check("empty table")
        await raw.execute(
            "INSERT INTO sessions (session_id, workspace, actor_key, identity_source, stable, kind, registered_us,"
            " last_seen_us, heartbeats, active_items) SELECT 's' || g, 'default', 'a' || g, 't', true, 'agent', g, g,"
            " 0, g % 2 FROM generate_series(1, 3000) AS g"
        )
        await check("filled, before ANALYZE")
        await raw.execute("ANALYZE sessions")
        await check("after ANALYZE")
    finally:
        await raw.close()
