"""Agent sessions: identity, register, heartbeat, end; who acts. Pure, no I/O."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from eventcoord import errors
from eventcoord.codec import format_time
from eventcoord.commands import HeartbeatAgent, RegisterAgent
from eventcoord.context import Context, Decision, Draft
from eventcoord.domain import streams
from eventcoord.events import (
    AgentHeartbeat,
    AgentRegistered,
    HandoffNoted,
)
from eventcoord.sanitize import ACTOR_CAP, HOST_CAP, clean_line, clean_text

_TOKEN_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, slots=True)
class SessionState:
    """The current state of one session, as the read model holds it."""

    session_id: str
    actor_key: str
    kind: str
    stable: bool
    identity_source: str
    host: str | None
    last_seen_us: int
    ended_us: int | None
    working_on: str | None
    token_id: str | None = None  # the token that registered it (None: registered before binding)


@dataclass(frozen=True, slots=True)
class Identity:
    """A resolved actor identity (docs/protocol.md#identity)."""

    actor_key: str
    source: str
    stable: bool
    runtime: str | None


@dataclass(frozen=True, slots=True)
class Claimant:
    """Who claims, releases or posts: a session, or a human/admin token without one."""

    session_id: str | None
    actor_key: str


@dataclass(frozen=True, slots=True)
class HeartbeatState:
    """What heartbeat_agent decides on: the session and, with a note, the issues it holds."""

    session: SessionState | None
    held_issues: list[str]


def resolve_identity(cmd: RegisterAgent, session_id: str) -> Identity:
    """Resolve the actor in strict priority: explicit, runtime session id, ancestry, none.

    The raw runtime session id is never stored: only a domain-separated digest of it.
    """
    host = clean_line(cmd.host, HOST_CAP) or "unknown-host"
    if cmd.actor is not None:
        actor = clean_line(cmd.actor, len(cmd.actor)) or ""
        if not actor or len(actor) > ACTOR_CAP:
            # Never cut, never dropped for another identity: two long names would become
            # one actor, and an empty one an unresolved session the caller did not ask for.
            raise errors.invalid(
                "actor",
                f"actor: 1 to {ACTOR_CAP} characters, not counting control or invisible ones "
                f"(got {len(actor)} after removing them)",
            )
        return Identity(actor, "explicit-override", True, None)
    if cmd.runtime_session_id:
        runtime = _TOKEN_SAFE.sub("", cmd.runtime or "") or "unknown"
        digest = hashlib.sha256(("eventcoord:" + cmd.runtime_session_id).encode()).hexdigest()[:24]
        return Identity(f"{runtime}:thread-{digest}:{host}", f"runtime-session-id:{runtime}", True, runtime)
    if cmd.process_ancestry and _TOKEN_SAFE.sub("", cmd.process_ancestry):
        digest = _TOKEN_SAFE.sub("", cmd.process_ancestry)[:32]
        return Identity(f"process-ancestry:anc-{digest}:{host}", "process-ancestry", False, None)
    return Identity(f"unresolved:{session_id}", "unresolved", False, None)


def decide_register_agent(state: None, cmd: RegisterAgent, ctx: Context) -> Decision:
    """Start a session; a ``human`` session needs a human or admin token."""
    if cmd.kind == "human" and ctx.caller.role not in ("human", "admin"):
        raise errors.forbidden("only a human or admin token may register a human session")
    session_id = ctx.make_id("s")
    identity = resolve_identity(cmd, session_id)
    d = Draft(session_id=session_id, actor_key=identity.actor_key)
    d.add(
        streams.session(session_id),
        AgentRegistered(
            session_id=session_id,
            actor_key=identity.actor_key,
            identity_source=identity.source,
            stable=identity.stable,
            kind=cmd.kind,
            host=clean_line(cmd.host, HOST_CAP),
            runtime=identity.runtime,
            working_on=cmd.working_on,
            token_id=ctx.caller.token_id,
        ),
    )
    d.result = {
        "session_id": session_id,
        "actor_key": identity.actor_key,
        "identity_source": identity.source,
        "stable": identity.stable,
        "ttl_seconds": ctx.ttl_seconds,
    }
    return d.decided()


def require_session(session: SessionState | None, session_id: str) -> SessionState:
    """The session, or 404 when it does not exist in this workspace."""
    if session is None:
        raise errors.session_not_found(session_id)
    return session


def require_not_ended(session: SessionState | None, session_id: str, *, already: bool = False) -> SessionState:
    """The session if it has not ended (a stale one may still act: its command revives it)."""
    s = require_session(session, session_id)
    if s.ended_us is not None:
        raise errors.session_ended(session_id, already=already)
    return s


def require_live(session: SessionState | None, session_id: str, ctx: Context) -> SessionState:
    """The session if it is live; ended or stale sessions may not claim (SESSION_NOT_LIVE)."""
    s = require_session(session, session_id)
    if not ctx.is_live(s.last_seen_us, s.ended_us):
        raise errors.session_not_live(session_id, ended=s.ended_us is not None)
    return s


def decide_heartbeat_agent(state: HeartbeatState, cmd: HeartbeatAgent, ctx: Context) -> Decision:
    """Refresh liveness (reviving a stale session); an ended session can do nothing more.

    A handoff note goes to every issue the session holds, else to the one it declares.
    """
    s = require_not_ended(state.session, cmd.session_id)
    d = Draft(session_id=s.session_id, actor_key=s.actor_key)
    d.add(streams.session(s.session_id), AgentHeartbeat(session_id=s.session_id, working_on=cmd.working_on))
    note = clean_text(cmd.handoff_note)
    if note:
        declared = cmd.working_on if isinstance(cmd.working_on, str) else s.working_on
        for issue in state.held_issues or ([declared] if declared else []):
            d.add(streams.issue(issue), HandoffNoted(issue=issue, session_id=s.session_id, note=note))
    d.result = {"last_heartbeat_at": format_time(ctx.now_us)}
    return d.decided()


def token_actor(ctx: Context) -> str:
    """The actor key of a command sent without a session (a human or admin token)."""
    return f"token:{ctx.caller.role}"


def claimant(session_id: str | None, session: SessionState | None, ctx: Context) -> Claimant:
    """The claiming party; a claiming session must be live (SESSION_NOT_LIVE)."""
    if session_id is None:
        return Claimant(None, token_actor(ctx))
    s = require_live(session, session_id, ctx)
    return Claimant(s.session_id, s.actor_key)


def acting(session_id: str | None, session: SessionState | None, ctx: Context) -> Claimant:
    """A releasing or posting party: it must exist and not have ended (stale is fine)."""
    if session_id is None:
        return Claimant(None, token_actor(ctx))
    s = require_not_ended(session, session_id)
    return Claimant(s.session_id, s.actor_key)
