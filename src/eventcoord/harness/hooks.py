"""Answering a harness's hook: bind its session, do what the event asks, answer what it reads.

``SessionStart`` briefs the session; ``UserPromptSubmit``, ``PostToolUse`` and ``Stop`` are
signs of life that deliver news once; a ``PreToolUse`` of a writing tool claims its files
in one ``claim_files`` and denies the write when another live session holds one;
``SessionEnd`` ends the session with the last ``Stop``'s message as its handoff note.
Every command goes through the service, as any client's would.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection

from eventcoord import errors
from eventcoord.commands import ClaimFiles, EndAgent
from eventcoord.context import Caller
from eventcoord.domain.paths import matches
from eventcoord.errors import DomainError, ErrorCode
from eventcoord.harness import arrivals, others, reads
from eventcoord.harness.answers import NOTHING, HookAnswer, HookSession, deny, tell
from eventcoord.harness.bindings import Bound, Key, as_bound, bind, bound_session, deliver, remember_message, thread_of
from eventcoord.harness.briefing import NOTES, PEERS, briefing
from eventcoord.harness.denial import denial
from eventcoord.harness.edits import Target, targets
from eventcoord.harness.news import news
from eventcoord.harness.payloads import (
    AnyPayload,
    OtherEvent,
    PostToolUse,
    PreToolUse,
    SessionEnd,
    SessionStart,
    Stop,
    UserPromptSubmit,
)
from eventcoord.service import Service
from eventcoord.store.base import EventStore

#: The events that are signs of life between the model's turns, and deliver news.
BetweenTurns = UserPromptSubmit | PostToolUse | Stop
#: The most files one tool call may claim (``claim_files`` takes up to 100 paths).
MAX_TARGETS = 100


@dataclass(frozen=True, slots=True)
class Hooks:
    """The hook route's work, over the service and its store."""

    service: Service
    store: EventStore

    async def answer(self, caller: Caller, harness: str, payload: AnyPayload | OtherEvent) -> HookAnswer:
        """What ``harness`` reads back from the hook ``payload`` of ``caller``'s workspace."""
        if caller.role == "reader":
            raise errors.forbidden("a reader token may not send hooks")
        key = Key(caller.workspace, harness, thread_of(payload.session_id), payload.session_id)
        match payload:
            case SessionEnd():
                return await self._end(caller, key)
            case SessionStart():
                return await self._start(caller, key)
            case PreToolUse():
                return await self._pre_tool_use(caller, key, payload)
            case UserPromptSubmit() | PostToolUse() | Stop():
                return await self._between_turns(caller, key, payload)
        await bind(self.service, self.store, caller, key)  # a sign of life; nothing to say
        return NOTHING

    async def session_of(self, caller: Caller, harness: str, harness_session_id: str) -> HookSession:
        """The eventcoord session ``harness``'s session ``harness_session_id`` is bound to in
        ``caller``'s workspace; 404 ``NOT_FOUND`` when no hook of it has been answered."""
        thread = thread_of(harness_session_id)
        seen = await self.store.query(lambda c: reads.binding(c, caller.workspace, harness, thread))
        if seen.row is None:
            raise errors.not_found(
                f"no eventcoord session is bound to this {harness} session: no hook of it has reached this "
                "workspace (is the repository set up with `eventcoord init`?)",
                {"harness": harness},
            )
        return HookSession(
            harness=harness, session_id=seen.row.session_id, actor_key=seen.row.actor_key, live=seen.live
        )

    async def _start(self, caller: Caller, key: Key) -> HookAnswer:
        bound = await bind(self.service, self.store, caller, key)
        ws, sid = key.workspace, bound.session_id

        def read(conn: Connection) -> tuple[int, str, str]:
            upto = arrivals.head(conn)
            peers = others.peers(conn, ws, sid, PEERS)
            notes = others.resumable_notes(conn, ws, bound.actor_key, NOTES)
            got = _news(conn, ws, bound, upto)
            told = briefing(sid, bound.actor_key, peers, got.messages, got.released, notes)
            return upto, told, briefing(sid, bound.actor_key, peers, notes=notes)

        upto, told, without_news = await self.store.query(read)
        if not await deliver(self.store, key, bound, upto):
            told = without_news  # another hook told it meanwhile
        return tell("SessionStart", told)

    async def _between_turns(self, caller: Caller, key: Key, payload: BetweenTurns) -> HookAnswer:
        ws = key.workspace
        bound = await bind(self.service, self.store, caller, key, also=lambda c, row: _news(c, ws, as_bound(row)))
        if isinstance(payload, Stop):
            await remember_message(self.store, key, bound, payload.last_assistant_message)
        got: _Got = bound.also if bound.also is not None else await self.store.query(lambda c: _news(c, ws, bound))
        told = news(
            bound.session_id, got.messages, got.released, registered=bound.renewed, previous=bound.previous_session_id
        )
        # The position moves with news, and with a heartbeat (at most once a third of the
        # TTL), so the next hook's search for news starts from a recent position.
        if (got.messages or got.released or bound.beat or bound.renewed) and not await deliver(
            self.store, key, bound, got.upto
        ):
            told = news(bound.session_id, registered=bound.renewed, previous=bound.previous_session_id)
        return tell(str(type(payload).__struct_config__.tag), told)

    async def _pre_tool_use(self, caller: Caller, key: Key, payload: PreToolUse) -> HookAnswer:
        wanted = targets(payload.tool_name, payload.tool_input, payload.cwd)
        if not wanted:  # not a writing tool, or nothing it writes lies inside cwd: a sign of life
            await bind(self.service, self.store, caller, key)
            return NOTHING
        if len(wanted) > MAX_TARGETS:
            return deny(
                f"eventcoord: not written. One edit may claim at most {MAX_TARGETS} files and this one writes "
                f"{len(wanted)}: split it into smaller edits."
            )
        files = [t.path for t in wanted]
        for _ in range(2):  # once more if the session ended between its binding and its claim
            bound = await bind(self.service, self.store, caller, key, over=files)
            own: list[str] = bound.also or []
            sid = bound.session_id
            todo = [t for t in wanted if not _covered(t, own)]
            if not todo:
                return NOTHING
            issue = bound.lease_issue or f"edit:{sid}"
            claim = ClaimFiles(session_id=sid, issue=issue, paths=[t.pattern for t in todo], exclusive=True)
            try:
                outcome = await self.service.execute(caller, claim)
            except DomainError as e:
                if e.code == ErrorCode.SESSION_NOT_LIVE:
                    continue
                raise
            refusal = outcome.refusal
            if refusal is None or refusal.code != ErrorCode.FILES_CLAIMED:
                return NOTHING
            # A conflict with its own claim of another issue is still its own file.
            blocking = [c for c in refusal.details.get("conflicts", []) if c.get("holder_session_id") != sid]
            if not blocking:
                return NOTHING
            return deny(denial(sid, issue, blocking, {t.pattern: t.path for t in todo}))
        return NOTHING

    async def _end(self, caller: Caller, key: Key) -> HookAnswer:
        row = await bound_session(self.store, key)
        if row is None or row.ended_us is not None:
            return NOTHING
        end = EndAgent(
            session_id=row.session_id, handoff_note=row.last_message, command_id=f"hook-end:{row.session_id}"
        )
        try:
            await self.service.execute(caller, end)
        except DomainError as e:
            if e.code != ErrorCode.SESSION_NOT_LIVE:  # ended meanwhile: nothing left to do
                raise
        return NOTHING


def _covered(target: Target, own: list[str]) -> bool:
    """The session holds the file already: one of its exclusive claims (``own``) matches it."""
    return any(matches(pattern, target.path) for pattern in own)


@dataclass(frozen=True, slots=True)
class _Got:
    """What arrived for a session up to ``upto``."""

    upto: int
    messages: list[arrivals.Message]
    released: list[arrivals.Release]


def _news(conn: Connection, workspace: str, bound: Bound, upto: int | None = None) -> _Got:
    """Messages and lost holds of the bound session (and the one before it) since the last delivery."""
    upto = arrivals.head(conn) if upto is None else upto
    sessions = [bound.session_id] + ([bound.previous_session_id] if bound.previous_session_id else [])
    after = bound.delivered_position
    released = arrivals.releases(conn, workspace, sessions, after, upto)
    # A renewed session that takes over what the one before it held is not news to it.
    taken = [r for r in released if r.by_session_id not in sessions]
    return _Got(upto, arrivals.inbox(conn, workspace, sessions, after, upto), taken)
