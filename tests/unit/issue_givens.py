"""Givens of the issue-tier unit tests: a fixed clock, a cast of sessions, views of an issue."""

from __future__ import annotations

from typing import Any

import pytest

from eventcoord.commands import ClaimIssue, VerifyHold
from eventcoord.context import Caller, Context, Decision
from eventcoord.domain.issues import (
    IssueState,
    IssueView,
    LeaseState,
)
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError

NOW = 1_700_000_000_000_000  # the database clock, in microseconds
TTL = 120
SECOND = 1_000_000
ISSUE = "ISS-1"
PROJECT = "proj"
LIMIT = 3


def ctx(role: str = "agent", *, now: int = NOW) -> Context:
    return Context(Caller("ws", role), now, TTL)  # type: ignore[arg-type]


def session(
    session_id: str,
    *,
    live: bool = True,
    ended: bool = False,
    kind: str = "agent",
    source: str = "explicit-override",
    actor_key: str | None = None,
    working_on: str | None = None,
) -> SessionState:
    """A session seen 1 s ago (live) or TTL + 1 s ago (stale); optionally ended."""
    stable = source == "explicit-override" or source.startswith("runtime-session-id:")
    last_seen = NOW - SECOND if live else NOW - (TTL + 1) * SECOND
    return SessionState(
        session_id=session_id,
        actor_key=actor_key if actor_key is not None else f"actor-{session_id}",
        kind=kind,
        stable=stable,
        identity_source=source,
        host="host-1",
        last_seen_us=last_seen,
        ended_us=(NOW - 2 * SECOND) if ended else None,
        working_on=working_on,
    )


def lease_of(holder: SessionState, token: int, *, issue: str = ISSUE, project: str = PROJECT) -> LeaseState:
    return LeaseState(
        issue=issue,
        project=project,
        session_id=holder.session_id,
        actor_key=holder.actor_key,
        fencing_token=token,
    )


def registry(
    last_token: int, *, project: str = PROJECT, note: str | None = None, note_by: str | None = None
) -> IssueState:
    return IssueState(
        issue=ISSUE,
        project=project,
        last_fencing_token=last_token,
        handoff_note=note,
        handoff_session_id=note_by,
    )


def view_held_by(
    holder: SessionState,
    token: int = 1,
    *,
    note: str | None = None,
    declarers: tuple[SessionState, ...] = (),
) -> IssueView:
    """An issue whose unreleased lease (token ``token``, the last one granted) is ``holder``'s."""
    return IssueView(
        ISSUE,
        registry(token, note=note, note_by=holder.session_id if note else None),
        lease_of(holder, token),
        holder,
        declarers,
    )


def free_view(*, reg: IssueState | None = None, declarers: tuple[SessionState, ...] = ()) -> IssueView:
    return IssueView(ISSUE, reg, None, None, declarers)


def claim(session_id: str, *, force: bool = False, project: str = PROJECT) -> ClaimIssue:
    return ClaimIssue(session_id=session_id, project=project, issue=ISSUE, force=force)


def verify(session_id: str, token: int | None = None) -> VerifyHold:
    return VerifyHold(session_id=session_id, issue=ISSUE, fencing_token=token)


def holder_obj(s: SessionState, live: bool) -> dict[str, Any]:
    return {"session_id": s.session_id, "actor_key": s.actor_key, "kind": s.kind, "live": live}


def refused(fn: Any, *args: Any) -> DomainError:
    with pytest.raises(DomainError) as info:
        fn(*args)
    return info.value


def types(d: Decision) -> list[str]:
    return [type(e).__name__ for _, e in d.events]


# Cast of sessions used throughout.
ME = session("s-me")
ALICE_LIVE = session("s-alice")
ALICE_STALE = session("s-alice", live=False)
HUMAN_LIVE = session("s-human", kind="human")
HUMAN_STALE = session("s-human", kind="human", live=False)
DECLARER = session("s-decl", working_on=ISSUE)
