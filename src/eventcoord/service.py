"""The command pipeline: authorise, load state, decide, append + inline read models.

Everything between loading state and the outcome happens in ONE database transaction, so
the decision's reads, its events and the read models it updates commit together. The
service returns an :class:`Outcome`; encoding it as the HTTP envelope is the API's job.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from sqlalchemy import Connection

import eventcoord.projections as projections
from eventcoord import errors, metrics
from eventcoord.auth import authorize
from eventcoord.codec import EventMetadata, encode, event_type
from eventcoord.commands import AnyCommand
from eventcoord.context import Caller, Context, Decision
from eventcoord.errors import DomainError, ErrorCode
from eventcoord.handlers import HANDLERS
from eventcoord.store import answers, dbclock, log
from eventcoord.store.base import EventStore
from eventcoord.store.log import NewEvent


class EventRef(msgspec.Struct, frozen=True):
    """A reference to an event an answer appended."""

    position: int
    type: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one command came to: its result, or a refusal recorded together with its events.

    ``position`` is the last appended position, or the head when nothing was appended;
    ``appended`` counts the events this call appended (0 for a replay); ``replayed`` says
    this is the stored first outcome of the same ``command_id``.
    """

    result: Any = None
    refusal: DomainError | None = None
    events: list[EventRef] = field(default_factory=list)
    position: int = 0
    appended: int = 0
    replayed: bool = False

    @property
    def status(self) -> int:
        """200, or the HTTP status of the refusal."""
        return 200 if self.refusal is None else self.refusal.status


class _StoredError(msgspec.Struct, frozen=True):
    code: str
    message: str
    details: dict[str, Any] = {}


class _Stored(msgspec.Struct, frozen=True, kw_only=True):
    """An outcome as the idempotency table keeps it (the fields of the answer envelope), and
    the ``token_id`` that sent the command (None in answers stored before it was kept)."""

    result: Any = None
    error: _StoredError | None = None
    events: list[EventRef] = []
    position: int = 0
    token_id: str | None = None


_stored_decoder = msgspec.json.Decoder(_Stored)


def _store(outcome: Outcome, token_id: str | None) -> bytes:
    e = outcome.refusal
    error = None if e is None else _StoredError(str(e.code), e.message, e.details)
    return encode(
        _Stored(result=outcome.result, error=error, events=outcome.events, position=outcome.position, token_id=token_id)
    )


def _replay(stored: _Stored) -> Outcome:
    e = stored.error
    refusal = None if e is None else DomainError(ErrorCode.lookup(e.code) or e.code, e.message, e.details)
    return Outcome(stored.result, refusal, stored.events, stored.position, replayed=True)


def command_digest(cmd: AnyCommand) -> str:
    """Idempotency compares the decoded command, without its ``command_id``."""
    return hashlib.sha256(encode(msgspec.structs.replace(cmd, command_id=None))).hexdigest()


class Service:
    """The command pipeline over one event store."""

    def __init__(self, store: EventStore, on_commit: Callable[[], None] | None = None) -> None:
        self.store = store
        self._on_commit = on_commit

    async def execute(self, caller: Caller, cmd: AnyCommand, correlation_id: str | None = None) -> Outcome:
        """Decide and commit one command; DomainErrors that write nothing are raised."""
        authorize(caller, cmd)
        handler = HANDLERS[type(cmd)]
        digest = command_digest(cmd) if cmd.command_id else ""

        def run(conn: Connection) -> log.Pending[Outcome]:
            if cmd.command_id:
                row = answers.recall(conn, caller.workspace, cmd.command_id)
                if row is not None:
                    body_hash, _, answer = row
                    stored = _stored_decoder.decode(answer)
                    # Another token never reads an answer it did not cause, nor learns that
                    # the id was used for a different command (docs/protocol.md#answers-and-idempotency).
                    if stored.token_id is not None and stored.token_id != caller.token_id:
                        raise errors.command_of_another_token(cmd.command_id)
                    if body_hash != digest:
                        raise errors.idempotency_mismatch(cmd.command_id)
                    replayed = _replay(stored)
                    return log.Pending(lambda real: replayed)
            now_us, ttl = dbclock.read(conn)
            ctx = Context(caller, now_us, ttl, cmd.command_id, correlation_id)
            decision = handler(conn, ctx, cmd)
            return _commit(conn, ctx, cmd, decision, digest)

        kind = str(cmd.__struct_config__.tag)
        started = time.perf_counter()
        try:
            # The store may prepare for the command: a PostgreSQL batch reads or locks ahead
            # what its commands read first (a heartbeat's session row, a claim's guard).
            outcome = await self.store.transact(run, command=(caller.workspace, cmd))
        except DomainError as e:
            metrics.COMMANDS.labels(kind, e.code).inc()
            raise
        metrics.observe_command(
            kind, "ok" if outcome.refusal is None else "refused_recorded", time.perf_counter() - started
        )
        if outcome.appended:
            metrics.EVENTS.inc(outcome.appended)
            metrics.HEAD.set(outcome.position)
            if self._on_commit is not None:
                self._on_commit()
        return outcome


def _commit(conn: Connection, ctx: Context, cmd: AnyCommand, decision: Decision, digest: str) -> log.Pending[Outcome]:
    meta = EventMetadata(
        workspace=ctx.workspace,
        actor_key=decision.actor_key,
        session_id=decision.session_id,
        command_id=cmd.command_id,
        correlation_id=ctx.correlation_id or cmd.command_id,
        causation_id=cmd.command_id,
    )
    recorded = log.append(conn, [NewEvent(stream, event, meta) for stream, event in decision.events], ctx.now_us)
    if not recorded and decision.error is not None:
        raise decision.error
    projections.apply(conn, recorded)
    last = recorded[-1].position if recorded else log.head(conn)
    finished: list[Outcome] = []

    def outcome(real: log.Resolve) -> Outcome:
        """The outcome with the positions the transaction committed with (built once)."""
        if not finished:
            refs = [EventRef(real(r.position), event_type(r.event)) for r in recorded]
            position = real(last)
            result = decision.result
            if decision.error is None and decision.result_position and isinstance(result, dict) and recorded:
                result = {**result, decision.result_position: position}
            finished.append(Outcome(result, decision.error, refs, position, len(recorded)))
        return finished[0]

    if cmd.command_id and (recorded or decision.replay_result is not None):

        def stored(real: log.Resolve) -> str:
            # The first outcome carries any secret; a replay answers with replay_result instead.
            first = outcome(real)
            kept = first if recorded else Outcome(decision.replay_result, None, first.events, first.position)
            return _store(kept, ctx.caller.token_id).decode()

        status = decision.error.status if decision.error is not None else 200
        answers.remember(conn, ctx.workspace, cmd.command_id, digest, status, ctx.now_us, stored)
    return log.Pending(outcome)
