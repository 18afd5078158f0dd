"""The exception hierarchy of eventcoord, and the one table of its stable error codes.

    EventCoordError
    ├── DomainError            a command refused by the rules; carries a stable ``code``
    │   └── ValidationFailed   422 VALIDATION, names the offending field
    ├── ConcurrencyError       an optimistic-concurrency race lost (stale expected version)
    ├── StoreError             the event store failed (driver errors are translated here)
    │   └── StoreUnavailable   the database cannot be reached (503, with Retry-After)
    └── PublishError           the relay could not hand an event to NATS

Every code, with its HTTP status, is a member of :class:`ErrorCode`; refusals are built by
the named constructors below (``errors.issue_held(issue, holder)``), never from a bare
string. Callers assert on ``.code``, never on message text.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """A stable, machine-readable error code and the HTTP status it answers with (SPEC §3)."""

    status: int

    def __new__(cls, code: str, status: int) -> ErrorCode:
        member = str.__new__(cls, code)
        member._value_ = code
        member.status = status
        return member

    VALIDATION = ("VALIDATION", 422)
    IDEMPOTENCY_MISMATCH = ("IDEMPOTENCY_MISMATCH", 422)
    UNAUTHENTICATED = ("UNAUTHENTICATED", 401)
    FORBIDDEN = ("FORBIDDEN", 403)
    NOT_FOUND = ("NOT_FOUND", 404)
    METHOD_NOT_ALLOWED = ("METHOD_NOT_ALLOWED", 405)
    PAYLOAD_TOO_LARGE = ("PAYLOAD_TOO_LARGE", 413)
    UNSUPPORTED_MEDIA_TYPE = ("UNSUPPORTED_MEDIA_TYPE", 415)
    SESSION_NOT_LIVE = ("SESSION_NOT_LIVE", 409)
    ISSUE_HELD = ("ISSUE_HELD", 409)
    HUMAN_HELD = ("HUMAN_HELD", 409)
    WIP_CAP_REACHED = ("WIP_CAP_REACHED", 409)
    FILES_CLAIMED = ("FILES_CLAIMED", 409)
    NOT_HOLDER = ("NOT_HOLDER", 409)
    NOT_FRESH_HOLDER = ("NOT_FRESH_HOLDER", 409)
    INVALID_TRANSITION = ("INVALID_TRANSITION", 409)
    LEASE_HELD = ("LEASE_HELD", 409)
    DEADLOCK = ("DEADLOCK", 409)
    AGENT_WIP_CAP_REACHED = ("AGENT_WIP_CAP_REACHED", 409)
    ALREADY_WAITING = ("ALREADY_WAITING", 409)
    CONCURRENCY = ("CONCURRENCY", 409)
    ARCHIVED = ("ARCHIVED", 410)
    RATE_LIMITED = ("RATE_LIMITED", 429)
    INTERNAL = ("INTERNAL", 500)
    STORE_UNAVAILABLE = ("STORE_UNAVAILABLE", 503)

    @classmethod
    def lookup(cls, code: str) -> ErrorCode | None:
        """The member spelled ``code``, if there is one."""
        member = cls._value2member_map_.get(code)
        return member if isinstance(member, ErrorCode) else None


class EventCoordError(Exception):
    """Base of every error eventcoord raises on purpose."""


class DomainError(EventCoordError):
    """A command refused by the domain rules, with a stable machine-readable code.

    ``code`` is an :class:`ErrorCode` when raised here; a client may also build one from
    the code string of an answer it received.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        #: Seconds a client should wait before trying again (the ``Retry-After`` header).
        self.retry_after = retry_after

    @property
    def status(self) -> int:
        """The HTTP status this error maps to."""
        code = self.code if isinstance(self.code, ErrorCode) else ErrorCode.lookup(self.code)
        return code.status if code is not None else 409


class ValidationFailed(DomainError):
    """422 VALIDATION naming the offending field (``details.field``)."""

    def __init__(self, field: str, message: str, reason: str | None = None) -> None:
        details = {"field": field} if reason is None else {"field": field, "reason": reason}
        super().__init__(ErrorCode.VALIDATION, message, details)


class ConcurrencyError(EventCoordError):
    """An append's expected stream version no longer matched: the caller lost a race."""

    code = ErrorCode.CONCURRENCY


class StoreError(EventCoordError):
    """The event store failed for a reason other than a lost race."""


class StoreUnavailable(StoreError):
    """The database cannot be reached (refused, reset, shut down, starting): safe to retry."""


class PublishError(EventCoordError):
    """An event could not be published to the broker."""


# --- named constructors, by code ---------------------------------------------------------


def invalid(field: str, message: str, reason: str | None = None) -> ValidationFailed:
    """422 VALIDATION: ``field`` (``paths[3]``, ``body``, a query parameter) is not acceptable."""
    return ValidationFailed(field, message, reason)


def invalid_request(message: str) -> DomainError:
    """422 VALIDATION for a request the HTTP layer could not take as sent (no one field)."""
    return DomainError(ErrorCode.VALIDATION, message)


def archived(position: int, before: int, file: str) -> DomainError:
    """410: a read of the log before an archive's boundary; the events are in its file."""
    return DomainError(
        ErrorCode.ARCHIVED,
        f"position {position} is archived: events below {before} were moved to {file}",
        {"position": position, "archived_before": before, "archive": file},
    )


def idempotency_mismatch(command_id: str) -> DomainError:
    """422: ``command_id`` was used before with a different command."""
    return DomainError(
        ErrorCode.IDEMPOTENCY_MISMATCH, "this command_id was used with a different command", {"command_id": command_id}
    )


def unauthenticated(message: str) -> DomainError:
    """401: no bearer token, or one nobody issued."""
    return DomainError(ErrorCode.UNAUTHENTICATED, message)


def forbidden(message: str, details: Mapping[str, Any] | None = None) -> DomainError:
    """403: the caller's role (or token) may not do this."""
    return DomainError(ErrorCode.FORBIDDEN, message, details)


def not_found(message: str, details: Mapping[str, Any] | None = None) -> DomainError:
    """404: no such thing in the caller's workspace (or no such route)."""
    return DomainError(ErrorCode.NOT_FOUND, message, details)


def session_of_another_token(session_id: str) -> DomainError:
    """403: the session was registered under another token (SPEC §5): only that token, or an
    admin of the workspace, may drive it."""
    return forbidden(f"session {session_id!r} belongs to the token that registered it", {"session_id": session_id})


def token_not_found(token_id: str) -> DomainError:
    """404: no token ``token_id`` in this workspace."""
    return not_found(f"no token {token_id!r} in this workspace", {"token_id": token_id})


def session_not_found(session_id: str) -> DomainError:
    """404: no session ``session_id`` in this workspace."""
    return not_found(f"no session {session_id!r} in this workspace", {"session_id": session_id})


def item_not_found(item_id: str) -> DomainError:
    """404: no work item ``item_id`` in this workspace."""
    return not_found(f"no work item {item_id!r} in this workspace", {"item_id": item_id})


def method_not_allowed(message: str) -> DomainError:
    """405: the route exists, the method does not."""
    return DomainError(ErrorCode.METHOD_NOT_ALLOWED, message)


def payload_too_large() -> DomainError:
    """413: the request body exceeds 1 MiB."""
    return DomainError(ErrorCode.PAYLOAD_TOO_LARGE, "request body exceeds 1 MiB")


def unsupported_media_type(content_type: str) -> DomainError:
    """415: a command body that is not ``application/json``."""
    return DomainError(
        ErrorCode.UNSUPPORTED_MEDIA_TYPE,
        f"a command body must be application/json, not {content_type[:100]!r}",
        {"content_type": content_type[:100]},
    )


def session_ended(session_id: str, *, already: bool = False) -> DomainError:
    """409 SESSION_NOT_LIVE: the session has ended and can do nothing more."""
    text = "has already ended" if already else "has ended"
    return DomainError(
        ErrorCode.SESSION_NOT_LIVE, f"session {session_id!r} {text}", {"session_id": session_id, "ended": True}
    )


def session_not_live(session_id: str, *, ended: bool) -> DomainError:
    """409 SESSION_NOT_LIVE: the session has ended or gone stale, so it may not claim."""
    text = "ended" if ended else "gone stale"
    return DomainError(
        ErrorCode.SESSION_NOT_LIVE, f"session {session_id!r} has {text}", {"session_id": session_id, "ended": ended}
    )


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


def concurrency() -> DomainError:
    """409: a race lost inside the database, retried until retries ran out; safe to retry."""
    return DomainError(ErrorCode.CONCURRENCY, "the command lost a race too many times; it is safe to retry")


def rate_limited(message: str, retry_after: int = 1) -> DomainError:
    """429: too many requests; retry after ``Retry-After``."""
    return DomainError(ErrorCode.RATE_LIMITED, message, retry_after=retry_after)


def internal() -> DomainError:
    """500: a surprise (logged in full on the server, never shown to the client)."""
    return DomainError(ErrorCode.INTERNAL, "internal error")


#: What a 503 STORE_UNAVAILABLE asks a client to wait (``Retry-After``, seconds).
STORE_RETRY_AFTER = 1


def store_unavailable(message: str = "the database cannot be reached; it is safe to retry") -> DomainError:
    """503: the database cannot be reached; safe to retry after ``Retry-After``."""
    return DomainError(ErrorCode.STORE_UNAVAILABLE, message, retry_after=STORE_RETRY_AFTER)


# --- client-side refusals (SPEC §7): defined in eventcoord.client.errors, re-exported here ---
# Loaded on first use: eventcoord.client.errors subclasses EventCoordError above, so a
# plain import here would be circular whichever module is imported first.
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:
    from eventcoord.client.errors import (
        AccessDenied as AccessDenied,
    )
    from eventcoord.client.errors import (
        Contended as Contended,
    )
    from eventcoord.client.errors import (
        InvalidRequest as InvalidRequest,
    )
    from eventcoord.client.errors import (
        NotCurrent as NotCurrent,
    )
    from eventcoord.client.errors import (
        NotFound as NotFound,
    )
    from eventcoord.client.errors import (
        Refused as Refused,
    )
    from eventcoord.client.errors import (
        Retryable as Retryable,
    )
    from eventcoord.client.errors import (
        Unreachable as Unreachable,
    )

_CLIENT_ERRORS = frozenset(
    {"AccessDenied", "Contended", "InvalidRequest", "NotCurrent", "NotFound", "Refused", "Retryable", "Unreachable"}
)


def __getattr__(name: str) -> Any:
    if name in _CLIENT_ERRORS:
        from eventcoord.client import errors as client_errors

        return getattr(client_errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
