"""Agent sessions: identity resolution, register, heartbeat, end. Pure, no I/O."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from eventcoord.codec import format_time
from eventcoord.commands import EndAgent, HeartbeatAgent, RegisterAgent
from eventcoord.context import Context, Decision
from eventcoord.errors import DomainError
from eventcoord.events import AgentEnded, AgentHeartbeat, AgentRegistered, HandoffNoted
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


@dataclass(frozen=True, slots=True)
class Identity:
    """A resolved actor identity (SPEC §1, §5)."""

    actor_key: str
    source: str
    stable: bool
    runtime: str | None


@dataclass(frozen=True, slots=True)
class Claimant:
    """Who claims, releases or posts: a session, or a human/admin token without one."""

    session_id: str | None
    actor_key: str


def stream(session_id: str) -> str:
    """The event stream of one session."""
    return f"session:{session_id}"


def resolve_identity(cmd: RegisterAgent, session_id: str) -> Identity:
    """Resolve the actor in strict priority: explicit, runtime session id, ancestry, none.

    The raw runtime session id is never stored: only a domain-separated digest of it.
    """
    host = clean_line(cmd.host, HOST_CAP) or "unknown-host"
    if cmd.actor and clean_line(cmd.actor, ACTOR_CAP):
        return Identity(clean_line(cmd.actor, ACTOR_CAP) or "", "explicit-override", True, None)
    if cmd.runtime_session_id:
        runtime = _TOKEN_SAFE.sub("", cmd.runtime or "") or "unknown"
        digest = hashlib.sha256(("eventcoord:" + cmd.runtime_session_id).encode()).hexdigest()[:24]
        return Identity(f"{runtime}:thread-{digest}:{host}", f"runtime-session-id:{runtime}", True, runtime)
    if cmd.process_ancestry and _TOKEN_SAFE.sub("", cmd.process_ancestry):
        digest = _TOKEN_SAFE.sub("", cmd.process_ancestry)[:32]
        return Identity(f"process-ancestry:anc-{digest}:{host}", "process-ancestry", False, None)
    return Identity(f"unresolved:{session_id}", "unresolved", False, None)


def decide_register(cmd: RegisterAgent, ctx: Context) -> Decision:
    """Start a session; a ``human`` session needs a human or admin token."""
    if cmd.kind == "human" and ctx.caller.role not in ("human", "admin"):
        raise DomainError("FORBIDDEN", "only a human or admin token may register a human session")
    session_id = ctx.make_id("s")
    identity = resolve_identity(cmd, session_id)
    d = Decision(session_id=session_id, actor_key=identity.actor_key)
    d.add(
        stream(session_id),
        AgentRegistered(
            session_id=session_id,
            actor_key=identity.actor_key,
            identity_source=identity.source,
            stable=identity.stable,
            kind=cmd.kind,
            host=clean_line(cmd.host, HOST_CAP),
            runtime=identity.runtime,
            working_on=cmd.working_on,
        ),
    )
    d.result = {
        "session_id": session_id,
        "actor_key": identity.actor_key,
        "identity_source": identity.source,
        "stable": identity.stable,
        "ttl_seconds": ctx.ttl_seconds,
    }
    return d


def require_session(session: SessionState | None, session_id: str) -> SessionState:
    """The session, or 404 when it does not exist in this workspace."""
    if session is None:
        raise DomainError("NOT_FOUND", f"no session {session_id!r} in this workspace", {"session_id": session_id})
    return session


def require_live(session: SessionState | None, session_id: str, ctx: Context) -> SessionState:
    """The session if it is live; ended or stale sessions may not claim (SESSION_NOT_LIVE)."""
    s = require_session(session, session_id)
    if not ctx.is_live(s.last_seen_us, s.ended_us):
        raise DomainError(
            "SESSION_NOT_LIVE",
            f"session {session_id!r} has {'ended' if s.ended_us is not None else 'gone stale'}",
            {"session_id": session_id, "ended": s.ended_us is not None},
        )
    return s


def decide_heartbeat(session: SessionState | None, held_issues: list[str], cmd: HeartbeatAgent, ctx: Context) -> Decision:
    """Refresh liveness (reviving a stale session); an ended session can do nothing more."""
    s = require_session(session, cmd.session_id)
    if s.ended_us is not None:
        raise DomainError("SESSION_NOT_LIVE", f"session {cmd.session_id!r} has ended", {"session_id": cmd.session_id, "ended": True})
    d = Decision(session_id=s.session_id, actor_key=s.actor_key)
    d.add(stream(s.session_id), AgentHeartbeat(session_id=s.session_id, working_on=cmd.working_on))
    note = clean_text(cmd.handoff_note)
    if note:
        declared = cmd.working_on if isinstance(cmd.working_on, str) else s.working_on
        for issue in held_issues or ([declared] if declared else []):
            d.add(f"issue:{issue}", HandoffNoted(issue=issue, session_id=s.session_id, note=note))
    d.result = {"last_heartbeat_at": format_time(ctx.now_us)}
    return d


def decide_end(session: SessionState | None, cmd: EndAgent, ctx: Context) -> tuple[SessionState, Decision]:
    """Begin ending a session; the caller adds the releases of everything it held."""
    s = require_session(session, cmd.session_id)
    if s.ended_us is not None:
        raise DomainError("SESSION_NOT_LIVE", f"session {cmd.session_id!r} has already ended", {"session_id": cmd.session_id, "ended": True})
    return s, Decision(session_id=s.session_id, actor_key=s.actor_key)


def ended_event(s: SessionState, cmd: EndAgent) -> AgentEnded:
    """The closing event of a session, carrying its sanitised handoff note."""
    return AgentEnded(session_id=s.session_id, handoff_note=clean_text(cmd.handoff_note))


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
    s = require_session(session, session_id)
    if s.ended_us is not None:
        raise DomainError("SESSION_NOT_LIVE", f"session {session_id!r} has ended", {"session_id": session_id, "ended": True})
    return Claimant(s.session_id, s.actor_key)
