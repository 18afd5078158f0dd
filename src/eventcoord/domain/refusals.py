"""The refusals of the domain rules: contention, holding, waiting (409s, docs/protocol.md#errors).

Each is a named constructor of :class:`~eventcoord.errors.DomainError` with its stable
:class:`~eventcoord.errors.ErrorCode` and the ``details`` a client acts on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eventcoord.errors import DomainError, ErrorCode


def _holder_details(issue: str, holder: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        "issue": issue,
        "session_id": (holder or {}).get("session_id"),
        "actor_key": (holder or {}).get("actor_key"),
    }


def issue_held(issue: str, holder: Mapping[str, Any] | None) -> DomainError:
    """409: another live session holds (or declares it is working on) the issue."""
    return DomainError(
        ErrorCode.ISSUE_HELD, f"issue {issue!r} is being worked on by another session", _holder_details(issue, holder)
    )


def human_held(issue: str, holder: Mapping[str, Any] | None) -> DomainError:
    """409: a person holds the issue; ask first (or force, as a human or admin)."""
    return DomainError(
        ErrorCode.HUMAN_HELD, f"issue {issue!r} is held by a person: ask first", _holder_details(issue, holder)
    )


def wip_cap_reached(project: str, limit: int, live_count: int) -> DomainError:
    """409: the project already has ``limit`` live leases."""
    return DomainError(
        ErrorCode.WIP_CAP_REACHED,
        f"project {project!r} has {live_count} live leases (limit {limit})",
        {"project": project, "limit": limit, "live_count": live_count},
    )


def files_claimed(conflicts: list[dict[str, Any]]) -> DomainError:
    """409: requested paths overlap claims of others; ``conflicts`` names each pair."""
    return DomainError(
        ErrorCode.FILES_CLAIMED,
        f"{len(conflicts)} requested path(s) overlap claims held by others; nothing was claimed",
        {"conflicts": conflicts},
    )


def not_issue_holder(issue: str, session_id: str, holder_session_id: str | None) -> DomainError:
    """409 NOT_HOLDER: only the holder of an issue's lease may release it."""
    return DomainError(
        ErrorCode.NOT_HOLDER,
        f"session {session_id!r} does not hold issue {issue!r}",
        {"issue": issue, "session_id": session_id, "holder_session_id": holder_session_id},
    )


def not_item_holder(item_id: str, session_id: str | None, holder_session_id: str | None) -> DomainError:
    """409 NOT_HOLDER: only the claiming session (or an admin) moves a work item on."""
    return DomainError(
        ErrorCode.NOT_HOLDER,
        f"work item {item_id!r} is held by another session",
        {"item_id": item_id, "session_id": session_id, "holder_session_id": holder_session_id},
    )


def not_lease_holder(name: str, session_id: str, holder_session_id: str | None) -> DomainError:
    """409 NOT_HOLDER: only the holder of record renews or releases a named lease."""
    return DomainError(
        ErrorCode.NOT_HOLDER,
        f"session {session_id!r} does not hold lease {name!r}",
        {"name": name, "session_id": session_id, "holder_session_id": holder_session_id},
    )


def token_not_current(issue: str, presented: int, current: int | None) -> DomainError:
    """409 NOT_FRESH_HOLDER: the fencing token presented is not the caller's current one."""
    return DomainError(
        ErrorCode.NOT_FRESH_HOLDER,
        f"fencing token {presented} is not the current token of your lease on {issue!r}",
        {
            "issue": issue,
            "reason": "fencing-token-not-current",
            "presented_fencing_token": presented,
            "current_fencing_token": current,
        },
    )


def durably_held(issue: str, state: str, reason: str, holder: Mapping[str, Any] | None) -> DomainError:
    """409 NOT_FRESH_HOLDER: another session durably holds the issue (verify_hold)."""
    return DomainError(
        ErrorCode.NOT_FRESH_HOLDER,
        f"issue {issue!r} is durably held by another session ({reason})",
        {"issue": issue, "effective_state": state, "reason": reason, "holder": holder},
    )


def invalid_transition(item_id: str, status: str, wanted: str) -> DomainError:
    """409: a work item in ``status`` cannot become ``wanted``."""
    return DomainError(
        ErrorCode.INVALID_TRANSITION,
        f"work item {item_id!r} is {status}; it cannot become {wanted}",
        {"item_id": item_id, "status": status, "wanted": wanted},
    )


def lease_held(name: str, session_id: str, actor_key: str | None, expires_at: str) -> DomainError:
    """409: another session holds the named lease until ``expires_at``."""
    return DomainError(
        ErrorCode.LEASE_HELD,
        f"lease {name!r} is held by session {session_id!r}",
        {"name": name, "session_id": session_id, "actor_key": actor_key, "expires_at": expires_at},
    )


def deadlock(cycle: list[dict[str, str]]) -> DomainError:
    """409: waiting would close a cycle in the wait-for graph; ``cycle`` names it in order."""
    path = " -> ".join(f"{c['session_id']} waits for {c['kind']} {c['key']!r}" for c in cycle)
    return DomainError(ErrorCode.DEADLOCK, f"waiting would deadlock: {path}", {"cycle": cycle})


def agent_wip_cap_reached(project: str, limit: int, held: int) -> DomainError:
    """409: the session already holds ``limit`` live leases in the project."""
    return DomainError(
        ErrorCode.AGENT_WIP_CAP_REACHED,
        f"this session holds {held} live leases in project {project!r} (per-agent limit {limit})",
        {"project": project, "limit": limit, "held": held},
    )


def already_waiting(kind: str, key: str, place: int) -> DomainError:
    """409: a session waits in one line at a time; cancel_wait that one first."""
    return DomainError(
        ErrorCode.ALREADY_WAITING,
        f"this session already waits for {kind} {key!r} (place {place}); cancel_wait it first",
        {"kind": kind, "key": key, "place": place},
    )


def not_waiting(kind: str, key: str) -> DomainError:
    """409 NOT_HOLDER: cancel_wait for a line the session is not in."""
    return DomainError(
        ErrorCode.NOT_HOLDER, f"this session does not wait for {kind} {key!r}", {"kind": kind, "key": key}
    )
