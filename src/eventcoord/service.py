"""handle(command): authorise, load state, decide, append + inline read models, answer.

Everything between loading state and answering happens in ONE database transaction, so
the decision's reads, its events and the read models it updates commit together.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from sqlalchemy import Connection

import eventcoord.projections as projections
from eventcoord import metrics
from eventcoord.auth import authorize
from eventcoord.codec import EventMetadata, encode, event_type
from eventcoord.commands import AnyCommand
from eventcoord.context import Caller, Context, Decision
from eventcoord.errors import DomainError
from eventcoord.handlers import HANDLERS
from eventcoord.store import log
from eventcoord.store.base import EventStore
from eventcoord.store.log import NewEvent


class EventRef(msgspec.Struct, frozen=True):
    """A reference to an event an answer appended."""

    position: int
    type: str


class _Ok(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool = True
    result: Any
    events: list[EventRef]
    position: int


class ErrorBody(msgspec.Struct, frozen=True, kw_only=True):
    """The error member of the error envelope."""

    code: str
    message: str
    details: dict[str, Any] = {}


class _Err(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    ok: bool  # no default, so it is always written
    error: ErrorBody
    events: list[EventRef] = []
    position: int | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """An encoded answer: HTTP status, JSON body, and the head position after it."""

    status: int
    body: bytes
    position: int
    appended: int


def error_body(e: DomainError, refs: list[EventRef] | None = None, position: int | None = None) -> bytes:
    """The error envelope of SPEC §3."""
    return encode(_Err(ok=False, error=ErrorBody(code=e.code, message=e.message, details=e.details), events=refs or [], position=position))


def command_digest(cmd: AnyCommand) -> str:
    """Idempotency compares the decoded command, without its ``command_id``."""
    return hashlib.sha256(encode(msgspec.structs.replace(cmd, command_id=None))).hexdigest()


class Service:
    """The command pipeline over one event store."""

    def __init__(self, store: EventStore, on_commit: Callable[[int], None] | None = None) -> None:
        self.store = store
        self.on_commit = on_commit

    async def execute(self, caller: Caller, cmd: AnyCommand, correlation_id: str | None = None) -> Answer:
        """Decide and commit one command; DomainErrors that write nothing are raised."""
        authorize(caller, cmd)
        handler = HANDLERS[type(cmd)]
        digest = command_digest(cmd) if cmd.command_id else ""

        def run(conn: Connection) -> log.Pending[Answer]:
            if cmd.command_id:
                row = log.recall_answer(conn, caller.workspace, cmd.command_id)
                if row is not None:
                    body_hash, status, answer = row
                    if body_hash != digest:
                        raise DomainError(
                            "IDEMPOTENCY_MISMATCH",
                            "this command_id was used with a different command",
                            {"command_id": cmd.command_id},
                        )
                    head = log.head(conn)
                    return log.Pending(lambda real: Answer(status, answer.encode(), real(head), 0))
            now_us, ttl = log.clock(conn)
            ctx = Context(caller, now_us, ttl, cmd.command_id, correlation_id)
            decision = handler(conn, ctx, cmd)
            return _commit(conn, ctx, cmd, decision, digest)

        kind = str(cmd.__struct_config__.tag)
        started = time.perf_counter()
        try:
            answer = await self.store.transact(run)
        except DomainError as e:
            metrics.COMMANDS.labels(kind, e.code).inc()
            raise
        metrics.observe_command(kind, "ok" if answer.status == 200 else "refused_recorded", time.perf_counter() - started)
        if answer.appended:
            metrics.EVENTS.inc(answer.appended)
            metrics.HEAD.set(answer.position)
            if self.on_commit is not None:
                self.on_commit(answer.position)
        return answer


def _commit(conn: Connection, ctx: Context, cmd: AnyCommand, decision: Decision, digest: str) -> log.Pending[Answer]:
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
    encoded: list[tuple[int, bytes, int]] = []

    def answer(real: log.Resolve) -> tuple[int, bytes, int]:
        """Status, body and position, with the positions the transaction committed with."""
        if encoded:
            return encoded[0]
        refs = [EventRef(real(r.position), event_type(r.event)) for r in recorded]
        position = real(last)
        if decision.error is not None:
            status, body = decision.error.status, error_body(decision.error, refs, position)
        else:
            if decision.result_position and isinstance(decision.result, dict) and recorded:
                decision.result[decision.result_position] = position
            status, body = 200, encode(_Ok(result=decision.result, events=refs, position=position))
        encoded.append((status, body, position))
        return encoded[0]

    if cmd.command_id and (recorded or decision.replay_result is not None):

        def stored(real: log.Resolve) -> str:
            _, body, position = answer(real)
            if not recorded:  # the first answer carries the secret; only replays omit it
                body = encode(_Ok(result=decision.replay_result, events=[], position=position))
            return body.decode()

        status = decision.error.status if decision.error is not None else 200
        log.remember_answer(conn, ctx.workspace, cmd.command_id, digest, status, ctx.now_us, stored)

    def finish(real: log.Resolve) -> Answer:
        status, body, position = answer(real)
        return Answer(status, body, position, len(recorded))

    return log.Pending(finish)
