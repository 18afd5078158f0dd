"""The exception hierarchy of eventcoord (drawn on :class:`EventCoordError`), and the one
table of its stable error codes, :class:`ErrorCode`: each with its HTTP status and its family.

Errors are built by named constructors (below, and the domain's refusals in
:mod:`eventcoord.domain.refusals`); callers assert on ``.code``, never on message text.
The client's classes are imported as ``from eventcoord.client import Refused``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar


class Family(StrEnum):
    """What a caller can do about a refusal: the client raises a :class:`Refused` subclass per family."""

    INVALID_REQUEST = "invalid_request"  # the request itself is wrong: fix it, do not retry
    ACCESS_DENIED = "access_denied"  # the token is unknown, or its role may not do this
    NOT_FOUND = "not_found"  # no such thing in this workspace
    CONTENDED = "contended"  # someone else holds it: pick other work, or wait
    NOT_CURRENT = "not_current"  # the caller's own standing is gone
    RETRYABLE = "retryable"  # transient: the same request may succeed when sent again
    OTHER = "other"  # none of the above: a plain Refused


class ErrorCode(StrEnum):
    """A stable, machine-readable error code, the HTTP status it answers with and its family.

    Every code of docs/protocol.md#errors is a member. Errors are built by named
    constructors, never from a bare string: this module's (validation, access, the store),
    and the domain rules' refusals in :mod:`eventcoord.domain.refusals`
    (``refusals.issue_held(issue, holder)``). Callers assert on ``.code``, never on message text.
    """

    status: int
    family: Family

    def __new__(cls, code: str, status: int, family: Family) -> ErrorCode:
        member = str.__new__(cls, code)
        member._value_ = code
        member.status = status
        member.family = family
        return member

    VALIDATION = ("VALIDATION", 422, Family.INVALID_REQUEST)
    IDEMPOTENCY_MISMATCH = ("IDEMPOTENCY_MISMATCH", 422, Family.INVALID_REQUEST)
    UNAUTHENTICATED = ("UNAUTHENTICATED", 401, Family.ACCESS_DENIED)
    FORBIDDEN = ("FORBIDDEN", 403, Family.ACCESS_DENIED)
    NOT_FOUND = ("NOT_FOUND", 404, Family.NOT_FOUND)
    METHOD_NOT_ALLOWED = ("METHOD_NOT_ALLOWED", 405, Family.OTHER)
    PAYLOAD_TOO_LARGE = ("PAYLOAD_TOO_LARGE", 413, Family.INVALID_REQUEST)
    UNSUPPORTED_MEDIA_TYPE = ("UNSUPPORTED_MEDIA_TYPE", 415, Family.INVALID_REQUEST)
    REQUEST_TIMEOUT = ("REQUEST_TIMEOUT", 408, Family.RETRYABLE)
    SESSION_NOT_LIVE = ("SESSION_NOT_LIVE", 409, Family.NOT_CURRENT)
    ISSUE_HELD = ("ISSUE_HELD", 409, Family.CONTENDED)
    HUMAN_HELD = ("HUMAN_HELD", 409, Family.CONTENDED)
    WIP_CAP_REACHED = ("WIP_CAP_REACHED", 409, Family.CONTENDED)
    FILES_CLAIMED = ("FILES_CLAIMED", 409, Family.CONTENDED)
    NOT_HOLDER = ("NOT_HOLDER", 409, Family.NOT_CURRENT)
    NOT_FRESH_HOLDER = ("NOT_FRESH_HOLDER", 409, Family.NOT_CURRENT)
    INVALID_TRANSITION = ("INVALID_TRANSITION", 409, Family.NOT_CURRENT)
    LEASE_HELD = ("LEASE_HELD", 409, Family.CONTENDED)
    DEADLOCK = ("DEADLOCK", 409, Family.CONTENDED)
    AGENT_WIP_CAP_REACHED = ("AGENT_WIP_CAP_REACHED", 409, Family.CONTENDED)
    ALREADY_WAITING = ("ALREADY_WAITING", 409, Family.CONTENDED)
    CONCURRENCY = ("CONCURRENCY", 409, Family.RETRYABLE)
    ARCHIVED = ("ARCHIVED", 410, Family.OTHER)
    RATE_LIMITED = ("RATE_LIMITED", 429, Family.RETRYABLE)
    INTERNAL = ("INTERNAL", 500, Family.OTHER)
    STORE_UNAVAILABLE = ("STORE_UNAVAILABLE", 503, Family.RETRYABLE)

    @classmethod
    def lookup(cls, code: str) -> ErrorCode | None:
        """The member spelled ``code``, if there is one."""
        member = cls._value2member_map_.get(code)
        return member if isinstance(member, ErrorCode) else None


class EventCoordError(Exception):
    """Base of every error eventcoord raises on purpose.

    EventCoordError
    ├── DomainError            a command refused by the rules; carries a stable ``code``
    │   └── ValidationFailed   422 VALIDATION, names the offending field
    ├── ConcurrencyError       an optimistic-concurrency race lost (stale expected version)
    ├── StoreError             the event store failed (driver errors are translated here)
    │   └── StoreUnavailable   the database cannot be reached (503, with Retry-After)
    ├── PublishError           the relay could not hand an event to NATS
    ├── Refused                the client's error for an error envelope: ``code``, ``message``,
    │   ├── InvalidRequest     ``details``, ``status``; a subclass per :class:`Family`
    │   ├── AccessDenied       (catch a family, ``except Contended``, or test ``.code``)
    │   ├── NotFound
    │   ├── Contended
    │   ├── NotCurrent
    │   └── Retryable
    └── Unreachable            the client got no answer (no server, a timeout, a bare 5xx)
    """


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
    """403: the session was registered under another token (docs/protocol.md#roles): only that token, or an
    admin of the workspace, may drive it."""
    return forbidden(f"session {session_id!r} belongs to the token that registered it", {"session_id": session_id})


def command_of_another_token(command_id: str) -> DomainError:
    """403: ``command_id`` was first sent by another token; its answer is that token's alone."""
    return forbidden(
        "this command_id was sent by another token: its answer is not yours to read; use a new command_id",
        {"command_id": command_id},
    )


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


def concurrency() -> DomainError:
    """409: a race lost inside the database, retried until retries ran out; safe to retry."""
    return DomainError(ErrorCode.CONCURRENCY, "the command lost a race too many times; it is safe to retry")


def rate_limited(message: str, retry_after: int = 1) -> DomainError:
    """429: too many requests; retry after ``Retry-After``."""
    return DomainError(ErrorCode.RATE_LIMITED, message, retry_after=retry_after)


def request_timeout() -> DomainError:
    """408: the request's headers or body did not arrive in time; the connection is closed."""
    return DomainError(ErrorCode.REQUEST_TIMEOUT, "the request did not arrive in time; send it again, faster")


def internal() -> DomainError:
    """500: a surprise (logged in full on the server, never shown to the client)."""
    return DomainError(ErrorCode.INTERNAL, "internal error")


#: What a 503 STORE_UNAVAILABLE asks a client to wait (``Retry-After``, seconds).
STORE_RETRY_AFTER = 1


def store_unavailable(message: str = "the database cannot be reached; it is safe to retry") -> DomainError:
    """503: the database cannot be reached; safe to retry after ``Retry-After``."""
    return DomainError(ErrorCode.STORE_UNAVAILABLE, message, retry_after=STORE_RETRY_AFTER)


# --- what a client raises ------------------------------------------------------------------


class Refused(EventCoordError):
    """The service refused a command or a read with a stable ``code`` (an error envelope).

    A subclass per :class:`Family`; ``codes`` are that family's codes, from :class:`ErrorCode`.
    """

    family: ClassVar[Family] = Family.OTHER
    codes: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.codes = frozenset(code.value for code in ErrorCode if code.family is cls.family)

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None, status: int = 409) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}
        self.status = status

    def as_error(self) -> dict[str, Any]:
        """The envelope's ``error`` member: ``{code, message, details}``."""
        return {"code": self.code, "message": self.message, "details": self.details}


class InvalidRequest(Refused):
    """The request itself is wrong (``details.field`` names the field); fix it, do not retry."""

    family = Family.INVALID_REQUEST


class AccessDenied(Refused):
    """The token is unknown (401) or its role may not do this (403)."""

    family = Family.ACCESS_DENIED


class NotFound(Refused):
    """No such session, issue or item in this workspace."""

    family = Family.NOT_FOUND


class Contended(Refused):
    """Someone else holds what was asked for (the details name the holder); pick other work or wait."""

    family = Family.CONTENDED


class NotCurrent(Refused):
    """The caller's own standing is gone: its session ended or went stale, or it no longer holds it."""

    family = Family.NOT_CURRENT


class Retryable(Refused):
    """A transient refusal; the same request may succeed when sent again."""

    family = Family.RETRYABLE


class Unreachable(EventCoordError):
    """The server did not answer (not running, wrong URL, network, or a 5xx without an envelope)."""


#: The Refused subclass of each family (a plain Refused for ``Family.OTHER``).
FAMILIES: tuple[type[Refused], ...] = (InvalidRequest, AccessDenied, NotFound, Contended, NotCurrent, Retryable)
_BY_FAMILY: dict[Family, type[Refused]] = {cls.family: cls for cls in FAMILIES}


def refusal(code: str, message: str, details: dict[str, Any] | None = None, status: int = 409) -> Refused:
    """The Refused subclass of ``code``'s family (plain Refused for a code this client does not know)."""
    known = ErrorCode.lookup(code)
    family = _BY_FAMILY.get(known.family, Refused) if known is not None else Refused
    return family(code, message, details, status)
