"""Waiting lines (docs/protocol.md#waiting): join a resource's FIFO line, leave it, drop stale waiters.

A line is the waits of one resource (``kind``, ``key``) in log order: the place of a waiter
is its rank by the position of its ``WaitStarted``. A session waits in one line at a time
(so a hand-off, which ends the waiter's only wait, can never close a wait-for cycle).
Stale or ended waiters are dropped (``WaitAbandoned``) whenever their line is looked at. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eventcoord import errors
from eventcoord.commands import CancelWait
from eventcoord.context import Context, Decision, Draft, JoinRequest
from eventcoord.domain import refusals, streams
from eventcoord.domain.deadlock import WaitGraph, find_cycle
from eventcoord.domain.sessions import SessionState, require_not_ended
from eventcoord.events import DeadlockRefused, WaitAbandoned, WaitKind, WaitStarted


@dataclass(frozen=True, slots=True)
class Waiter:
    """One wait, as the read model holds it, with its session (None if it vanished)."""

    position: int
    kind: WaitKind
    key: str
    session_id: str
    actor_key: str
    since_us: int
    session: SessionState | None
    project: str | None = None
    issue: str | None = None
    paths: tuple[str, ...] = ()
    exclusive: bool = True
    ttl_seconds: int | None = None
    capacity: int | None = None


@dataclass(frozen=True, slots=True)
class JoinState:
    """What joining a line decides on: the line (FIFO), the caller's wait anywhere, the graph.

    ``graph`` is None when the caller is already in this line (nothing new is added).
    """

    line: Sequence[Waiter]
    current: Waiter | None  # the caller's wait, in this line or another
    graph: WaitGraph | None = None
    holders: Sequence[str] = field(default_factory=tuple)  # live holders the caller would wait for


@dataclass(frozen=True, slots=True)
class CancelState:
    """What cancel_wait decides on: the caller and its wait (if any) in the named line."""

    session: SessionState | None
    wait: Waiter | None


def waiter_live(w: Waiter, ctx: Context) -> bool:
    """A waiter is live like any session: not ended and seen within the TTL."""
    return w.session is not None and ctx.is_live(w.session.last_seen_us, w.session.ended_us)


def abandoned(w: Waiter, reason: str, by: str | None) -> tuple[str, WaitAbandoned]:
    """The event that drops ``w`` from its line."""
    event = WaitAbandoned(
        kind=w.kind,
        key=w.key,
        session_id=w.session_id,
        reason=reason,
        issue=w.issue if w.kind == "files" else None,
        by_session_id=by,
    )
    return stream_of(w.kind, w.key if w.kind != "files" else (w.issue or w.key)), event


def stream_of(kind: str, key: str) -> str:
    """The stream of a line's events: the issue's, the files of the waiting issue, the lease's."""
    if kind == "issue":
        return streams.issue(key)
    if kind == "files":
        return streams.files(key)
    return streams.named_lease(key)


def drop_stale(d: Draft, line: Sequence[Waiter], ctx: Context, by: str | None) -> list[Waiter]:
    """Drop the stale and ended waiters of a line (appending their ``WaitAbandoned``)."""
    kept: list[Waiter] = []
    for w in line:
        if waiter_live(w, ctx):
            kept.append(w)
        else:
            d.events.append(
                abandoned(w, "ended" if w.session is None or w.session.ended_us is not None else "stale", by)
            )
    return kept


def place_of(line: Sequence[Waiter], session_id: str) -> dict[str, int]:
    """``{place, waiters}`` of a session in a line (place 1 = next)."""
    for i, w in enumerate(line, start=1):
        if w.session_id == session_id:
            return {"place": i, "waiters": len(line)}
    return {"place": len(line) + 1, "waiters": len(line) + 1}


def join(d: Decision, state: JoinState, ctx: Context) -> Decision:
    """The second step of a decision that asks to wait (``d.join``): join the line behind its
    refusal (or stay in it), else refuse DEADLOCK / ALREADY_WAITING.

    Stale waiters of the line are dropped first; the refusal's details gain
    ``waiting: {place, waiters}``. The decision returned carries the events and the refusal.
    """
    asked = d.join
    if asked is None:
        return d
    started, refusal = asked.started, asked.refusal
    out = d.then()
    live = drop_stale(out, state.line, ctx, started.session_id)
    cur = state.current
    if cur is not None and (cur.kind, cur.key) != (started.kind, started.key) and not _same_files_wait(cur, started):
        raise refusals.already_waiting(cur.kind, cur.key, 0)
    stream = stream_of(started.kind, started.issue if started.kind == "files" and started.issue else started.key)
    if cur is None:
        cycle = find_cycle(state.graph or WaitGraph(), started.session_id, started.kind, started.key, state.holders)
        if cycle is not None:
            refused = DeadlockRefused(
                kind=started.kind,
                key=started.key,
                session_id=started.session_id,
                actor_key=started.actor_key,
                cycle=cycle,
            )
            out.add(stream, refused)
            out.error = refusals.deadlock(cycle)
            return out.decided()
        out.add(stream, started)
    waiting = place_of(live, started.session_id)
    out.error = errors.DomainError(refusal.code, refusal.message, {**refusal.details, "waiting": waiting})
    return out.decided()


def asks_to_join(
    d: Draft, started: WaitStarted, refusal: errors.DomainError, holders: Sequence[str], line: Sequence[Waiter] | None
) -> Decision:
    """The decision so far, refused, asking its handler to join the line next (:func:`join`)."""
    return d.decided(JoinRequest(started, refusal, tuple(holders), None if line is None else tuple(line)))


def _same_files_wait(cur: Waiter, started: WaitStarted) -> bool:
    return cur.kind == "files" == started.kind and cur.issue == started.issue


def decide_cancel_wait(state: CancelState, cmd: CancelWait, ctx: Context) -> Decision:
    """Leave a line; NOT_HOLDER when the session is not in it."""
    me = require_not_ended(state.session, cmd.session_id)
    kind, key = cancel_target(cmd)
    if state.wait is None:
        raise refusals.not_waiting(kind, key)
    d = Draft(session_id=me.session_id, actor_key=me.actor_key)
    d.events.append(abandoned(state.wait, "cancelled", me.session_id))
    d.result = {"kind": state.wait.kind, "key": state.wait.key, "cancelled": True}
    return d.decided()


def cancel_target(cmd: CancelWait) -> tuple[WaitKind, str]:
    """Which line cancel_wait names: exactly one of issue (alone), issue + paths, name."""
    if cmd.name is not None and cmd.issue is None and cmd.paths is None:
        return "lease", cmd.name
    if cmd.issue is not None and cmd.name is None:
        return ("files", cmd.issue) if cmd.paths else ("issue", cmd.issue)
    raise errors.invalid("issue", "name exactly one line: issue, issue with paths, or name")


def waits_row(w: Waiter, place: int) -> dict[str, Any]:
    """One row of ``GET /v1/waits``."""
    return {"kind": w.kind, "key": w.key, "session_id": w.session_id, "actor_key": w.actor_key, "place": place}
