"""The exception hierarchy of eventcoord.

    EventCoordError
    ├── DomainError            a command refused by the rules; carries a stable ``code``
    │   └── ValidationFailed   422 VALIDATION, names the offending field
    ├── ConcurrencyError       an optimistic-concurrency race lost (stale expected version)
    ├── StoreError             the event store failed (driver errors are translated here)
    └── PublishError           the relay could not hand an event to NATS

Callers assert on ``.code``, never on message text.
"""

from __future__ import annotations

from typing import Any

#: HTTP status of every stable domain error code.
HTTP_STATUS: dict[str, int] = {
    "VALIDATION": 422,
    "IDEMPOTENCY_MISMATCH": 422,
    "UNAUTHENTICATED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "PAYLOAD_TOO_LARGE": 413,
    "SESSION_NOT_LIVE": 409,
    "ISSUE_HELD": 409,
    "HUMAN_HELD": 409,
    "WIP_CAP_REACHED": 409,
    "FILES_CLAIMED": 409,
    "NOT_HOLDER": 409,
    "NOT_FRESH_HOLDER": 409,
    "INVALID_TRANSITION": 409,
    "LEASE_HELD": 409,
    "CONCURRENCY": 409,
}


class EventCoordError(Exception):
    """Base of every error eventcoord raises on purpose."""


class DomainError(EventCoordError):
    """A command refused by the domain rules, with a stable machine-readable code."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}

    @property
    def status(self) -> int:
        """The HTTP status this error maps to."""
        return HTTP_STATUS.get(self.code, 409)


class ValidationFailed(DomainError):
    """422 VALIDATION naming the offending field (``details.field``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__("VALIDATION", message, {"field": field})


class ConcurrencyError(EventCoordError):
    """An append's expected stream version no longer matched: the caller lost a race."""

    code = "CONCURRENCY"


class StoreError(EventCoordError):
    """The event store failed for a reason other than a lost race."""


class PublishError(EventCoordError):
    """An event could not be published to the broker."""


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
