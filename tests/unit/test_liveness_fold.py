"""Heartbeats and signs of life are folded per session within one ``apply`` (``sessions.Liveness``).

Property: applying any sequence of session events in one call leaves exactly the rows that
applying them one call per event leaves (the live path applies a command's few events at
a time, a rebuild or an ``as_of`` replay thousands), whatever the order of times.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, create_engine, select

from eventcoord import projections
from eventcoord.codec import EventMetadata
from eventcoord.events import AgentEnded, AgentHeartbeat, AgentRegistered, Event, MessagePosted, WipCapDenied
from eventcoord.projections.tables import messages, sessions
from eventcoord.store.log import RecordedEvent
from eventcoord.store.schema import metadata

SESSIONS = ("s1", "s2", "s3")

op = st.tuples(
    st.sampled_from(["register", "heartbeat", "declare", "clear", "message", "denied", "end"]),
    st.sampled_from(SESSIONS),
    # Times mostly rising, sometimes back (replicas' clocks): the fold must not assume order.
    st.integers(min_value=0, max_value=40),
)


def events_of(ops: list[tuple[str, str, int]]) -> list[RecordedEvent]:
    out: list[RecordedEvent] = []
    registered: set[str] = set()
    for i, (kind, sid, jitter) in enumerate(ops, start=1):
        at = 1_000_000 + i * 10 - jitter
        event: Event
        if kind == "register":
            if sid in registered:
                continue
            registered.add(sid)
            event = AgentRegistered(session_id=sid, actor_key=f"a-{sid}", identity_source="test", stable=True)
        elif sid not in registered:
            continue
        elif kind == "heartbeat":
            event = AgentHeartbeat(session_id=sid)
        elif kind == "declare":
            event = AgentHeartbeat(session_id=sid, working_on=f"I-{i}")
        elif kind == "clear":
            event = AgentHeartbeat(session_id=sid, working_on=None)
        elif kind == "message":
            event = MessagePosted(channel="c", body=str(i), session_id=sid, actor_key=f"a-{sid}")
        elif kind == "denied":  # a denial is not a sign of life
            event = WipCapDenied(project="P", issue="I-1", session_id=sid, actor_key=f"a-{sid}", limit=1, live_count=1)
        else:
            event = AgentEnded(session_id=sid)
        meta = EventMetadata(workspace="default", session_id=sid, actor_key=f"a-{sid}")
        out.append(
            RecordedEvent(position=len(out) + 1, stream=sid, version=i, event=event, metadata=meta, recorded_us=at)
        )
    return out


def fresh() -> Engine:
    engine = create_engine("sqlite://")
    metadata.create_all(engine)
    return engine


def rows(engine: Engine) -> dict[str, list[Any]]:
    with engine.connect() as conn:
        return {
            t.name: [tuple(r) for r in conn.execute(select(t).order_by(*t.primary_key.columns))]
            for t in (sessions, messages)
        }


@settings(max_examples=120, deadline=None)
@given(st.lists(op, max_size=60))
def test_one_apply_of_many_events_equals_one_apply_per_event(ops: list[tuple[str, str, int]]) -> None:
    recorded = events_of(ops)
    together, apart = fresh(), fresh()
    with together.begin() as conn:
        projections.apply(conn, recorded)
    with apart.begin() as conn:
        for r in recorded:
            projections.apply(conn, [r])
    assert rows(together) == rows(apart)


def test_a_folded_run_counts_every_heartbeat_and_keeps_the_last_declaration() -> None:
    recorded = events_of(
        [("register", "s1", 0), ("declare", "s1", 0), ("heartbeat", "s1", 0), ("message", "s1", 0)]
        + [("heartbeat", "s1", 0)] * 5
    )
    engine = fresh()
    with engine.begin() as conn:
        projections.apply(conn, recorded)
    with engine.connect() as conn:
        row = conn.execute(select(sessions.c.heartbeats, sessions.c.working_on, sessions.c.last_seen_us)).one()
    assert row.heartbeats == 7 and row.working_on == "I-2" and row.last_seen_us == recorded[-1].recorded_us
