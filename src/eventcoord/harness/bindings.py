"""A harness session bound to one eventcoord session: reused while live, renewed once not.

The database decides who registers: generation *g*'s ``register_agent`` carries a
``command_id`` derived from the binding and *g*, so concurrent first hooks on any replica
get the one session its idempotency record answers, and the binding moves only forward. A
hook is a sign of life, but costs a heartbeat only once the last sign is a third of the TTL
old, sent by the one hook whose compare-and-set on the binding row takes the turn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import Connection, update
from sqlalchemy.dialects import postgresql, sqlite

from eventcoord import errors
from eventcoord.commands import HeartbeatAgent, RegisterAgent
from eventcoord.context import Caller
from eventcoord.errors import DomainError, ErrorCode
from eventcoord.harness.reads import BindingRow, Seen, binding, binding_over
from eventcoord.sanitize import clean_text
from eventcoord.service import Service
from eventcoord.store.base import EventStore
from eventcoord.store.schema import harness_sessions

T = TypeVar("T")

#: The ``host`` of a hook's session: the server cannot see the harness's machine.
HOOK_HOST = "hook"
#: The longest Stop message kept as the handoff note of the session's end.
NOTE_CAP = 2000
_ATTEMPTS = 3


def thread_of(harness_session_id: str) -> str:
    """The key a harness's session id is stored under (a digest: any length or characters
    map to 64 hex digits, and the raw id is never stored)."""
    return hashlib.sha256(("eventcoord-hook:" + harness_session_id).encode("utf-8", "surrogatepass")).hexdigest()


def third_of_ttl(ttl_seconds: int) -> int:
    """A third of the TTL in microseconds: how often a hook's sign of life may cost a write."""
    return ttl_seconds * 1_000_000 // 3


def beat_due(last_seen_us: int | None, now_us: int, ttl_seconds: int) -> bool:
    """A sign of life is worth a write once the last one is a third of the TTL old."""
    return last_seen_us is None or now_us - last_seen_us >= third_of_ttl(ttl_seconds)


def next_generation(row: BindingRow | None) -> int:
    """The generation a renewal registers: 1 for a harness session never seen."""
    return 1 if row is None else row.generation + 1


@dataclass(frozen=True, slots=True)
class Key:
    """Which binding: the workspace, the harness, the digest of the harness's session id."""

    workspace: str
    harness: str
    thread: str
    harness_session_id: str

    def where(self) -> Any:
        t = harness_sessions.c
        return (t.workspace == self.workspace) & (t.harness == self.harness) & (t.thread == self.thread)


@dataclass(frozen=True, slots=True)
class Bound:
    """The eventcoord session a hook acts for, with its binding's delivery state and its
    most recently granted live lease.

    ``renewed``: this hook registered it (a first hook, or the one before had ended or gone
    stale); ``also``: what the caller's read found beside the binding (None when renewed).
    """

    session_id: str
    actor_key: str
    generation: int
    previous_session_id: str | None
    delivered_position: int
    last_message: str | None
    lease_issue: str | None
    renewed: bool
    beat: bool
    also: Any = None


async def bind(
    service: Service,
    store: EventStore,
    caller: Caller,
    key: Key,
    also: Callable[[Connection, BindingRow], Any] | None = None,
    *,
    over: Sequence[str] | None = None,
) -> Bound:
    """The live session bound to ``key``: reused (with a sign of life when one is due), or
    registered now. ``also(conn, binding)`` runs in the same read as the binding's when the
    session is reused (its answer is ``Bound.also``); ``over`` instead reads, in the
    binding's own statement, the patterns of the session's exclusive claims that could
    cover these files (``reads.binding_over``: one round trip on PostgreSQL)."""
    for _ in range(_ATTEMPTS):
        seen, extra = await (
            store.query_one(partial(_read_over, key, over))
            if over is not None
            else store.query(partial(_read, key, also))
        )
        row = seen.row
        if row is not None and seen.live:
            beat = beat_due(row.last_seen_us, seen.now_us, seen.ttl_seconds)
            if beat:
                try:
                    beat = await _beat(service, store, caller, key, row, seen)
                except DomainError as e:
                    if e.code != ErrorCode.SESSION_NOT_LIVE:  # it ended meanwhile: bind again
                        raise
                    continue
            return as_bound(row, renewed=False, beat=beat, also=extra)
        return await _renew(service, store, caller, key, seen)
    raise errors.concurrency()


def _read_over(key: Key, files: Sequence[str], conn: Connection) -> tuple[Seen, Any]:
    return binding_over(conn, key.workspace, key.harness, key.thread, files)


def _read(key: Key, also: Callable[[Connection, BindingRow], T] | None, conn: Connection) -> tuple[Seen, T | None]:
    seen = binding(conn, key.workspace, key.harness, key.thread)
    if also is None or seen.row is None or not seen.live:
        return seen, None
    return seen, also(conn, seen.row)


def as_bound(row: BindingRow, *, renewed: bool = False, beat: bool = False, also: Any = None) -> Bound:
    """The binding as a hook acts on it."""
    return Bound(
        session_id=row.session_id,
        actor_key=row.actor_key or "",
        generation=row.generation,
        previous_session_id=row.previous_session_id,
        delivered_position=row.delivered_position,
        last_message=row.last_message,
        lease_issue=row.lease_issue,
        renewed=renewed,
        beat=beat,
        also=also,
    )


async def _beat(service: Service, store: EventStore, caller: Caller, key: Key, row: BindingRow, seen: Seen) -> bool:
    """Send the session's heartbeat if this hook takes the turn: the compare-and-set that
    moves ``beat_claimed_us`` on past a third of the TTL succeeds for one hook only."""
    t = harness_sessions.c
    turn = seen.now_us - third_of_ttl(seen.ttl_seconds)

    def take(conn: Connection) -> bool:
        taken = conn.execute(
            update(harness_sessions)
            .where(
                key.where()
                & (t.session_id == row.session_id)
                & (t.beat_claimed_us.is_(None) | (t.beat_claimed_us <= turn))
            )
            .values(beat_claimed_us=seen.now_us)
        ).rowcount
        return bool(taken)

    if not await store.transact(take):
        return False
    await service.execute(caller, HeartbeatAgent(session_id=row.session_id))
    return True


async def _renew(service: Service, store: EventStore, caller: Caller, key: Key, seen: Seen) -> Bound:
    """Register the next generation (once, whoever asks) and move the binding to it."""
    generation = next_generation(seen.row)
    register = RegisterAgent(
        runtime=key.harness,
        runtime_session_id=key.harness_session_id,
        host=HOOK_HOST,
        command_id=f"hook:{key.harness}:{key.thread[:48]}:{generation}",
    )
    outcome = await service.execute(caller, register)
    session_id: str = outcome.result["session_id"]
    previous = seen.row.session_id if seen.row is not None else None
    row = await store.transact(lambda c: _move(c, key, generation, session_id, previous, outcome.position, seen.now_us))
    renewed = row.session_id == session_id and not outcome.replayed
    return as_bound(row, renewed=renewed, beat=False)


def _upsert(dialect: str) -> Any:
    return postgresql.insert(harness_sessions) if dialect == "postgresql" else sqlite.insert(harness_sessions)


def _move(
    conn: Connection, key: Key, generation: int, session_id: str, previous: str | None, position: int, now_us: int
) -> BindingRow:
    """Bind ``key`` to generation ``generation`` unless it is bound to a later one; the
    binding as it stands. A new binding delivers from the register on; a renewed one keeps
    its delivery position (what arrived for the previous session is still news)."""
    t = harness_sessions.c
    stmt = _upsert(conn.dialect.name).values(
        workspace=key.workspace,
        harness=key.harness,
        thread=key.thread,
        generation=generation,
        session_id=session_id,
        previous_session_id=previous,
        delivered_position=position,
        updated_us=now_us,
    )
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=[t.workspace, t.harness, t.thread],
            set_={
                "generation": stmt.excluded.generation,
                "session_id": stmt.excluded.session_id,
                "previous_session_id": stmt.excluded.previous_session_id,
                "updated_us": stmt.excluded.updated_us,
            },
            where=t.generation < stmt.excluded.generation,
        )
    )
    seen = binding(conn, key.workspace, key.harness, key.thread)
    assert seen.row is not None  # just written
    return seen.row


async def deliver(store: EventStore, key: Key, bound: Bound, upto: int) -> bool:
    """Mark everything up to ``upto`` delivered, if nobody else did since ``bound`` was read:
    the one hook that moves the position tells the model; a hook that loses tells nothing."""
    if upto <= bound.delivered_position:
        return True

    def move(conn: Connection) -> bool:
        moved = conn.execute(
            update(harness_sessions)
            .where(key.where() & (harness_sessions.c.delivered_position == bound.delivered_position))
            .values(delivered_position=upto)
        ).rowcount
        return bool(moved)

    return bool(await store.transact(move))


async def remember_message(store: EventStore, key: Key, bound: Bound, message: str | None) -> None:
    """Keep a Stop's last assistant message (cut) as the handoff note of the session's end
    (written only when it changed: a flood of Stops writes nothing)."""
    note = clean_text(message, NOTE_CAP)
    if not note or note == bound.last_message:
        return

    def keep(conn: Connection) -> None:
        conn.execute(update(harness_sessions).where(key.where()).values(last_message=note))

    await store.transact(keep)


async def bound_session(store: EventStore, key: Key) -> BindingRow | None:
    """The binding as it stands (no renewal, no sign of life): for a session's end."""
    seen = await store.query(lambda c: binding(c, key.workspace, key.harness, key.thread))
    return seen.row
