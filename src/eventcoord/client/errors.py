"""What a client of eventcoord raises: the service's refusals, by code family, and unreachability.

    EventCoordError
    ├── Refused                 an error envelope: ``code``, ``message``, ``details``, ``status``
    │   ├── InvalidRequest / AccessDenied / NotFound     the request, the token, the thing
    │   ├── Contended / NotCurrent                       someone else holds it; yours is gone
    │   └── Retryable                                    CONCURRENCY, RATE_LIMITED, STORE_UNAVAILABLE, REQUEST_TIMEOUT
    └── Unreachable             no answer from the server (refused, timeout, a 5xx without an envelope)
The codes of each family: :data:`FAMILIES` and docs/protocol.md#errors. Catch a family
(``except Contended``) or test ``.code``; never match message text.
"""

from __future__ import annotations

from typing import Any, ClassVar

from eventcoord.errors import EventCoordError


class Refused(EventCoordError):
    """The service refused a command or a read with a stable ``code`` (docs/protocol.md#errors)."""

    codes: ClassVar[frozenset[str]] = frozenset()

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

    codes = frozenset({"VALIDATION", "IDEMPOTENCY_MISMATCH", "PAYLOAD_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE"})


class AccessDenied(Refused):
    """The token is unknown (401) or its role may not do this (403)."""

    codes = frozenset({"UNAUTHENTICATED", "FORBIDDEN"})


class NotFound(Refused):
    """No such session, issue or item in this workspace."""

    codes = frozenset({"NOT_FOUND"})


class Contended(Refused):
    """Someone else holds what was asked for (the details name the holder); pick other work or wait."""

    codes = frozenset(
        {
            "ISSUE_HELD",
            "HUMAN_HELD",
            "FILES_CLAIMED",
            "LEASE_HELD",
            "WIP_CAP_REACHED",
            "AGENT_WIP_CAP_REACHED",
            "DEADLOCK",
            "ALREADY_WAITING",
        }
    )


class NotCurrent(Refused):
    """The caller's own standing is gone: its session ended or went stale, or it no longer holds it."""

    codes = frozenset({"SESSION_NOT_LIVE", "NOT_HOLDER", "NOT_FRESH_HOLDER", "INVALID_TRANSITION"})


class Retryable(Refused):
    """A transient refusal; the same request may succeed when sent again."""

    codes = frozenset({"CONCURRENCY", "RATE_LIMITED", "STORE_UNAVAILABLE", "REQUEST_TIMEOUT"})


class Unreachable(EventCoordError):
    """The server did not answer (not running, wrong URL, network, or a 5xx without an envelope)."""


FAMILIES: tuple[type[Refused], ...] = (InvalidRequest, AccessDenied, NotFound, Contended, NotCurrent, Retryable)
_BY_CODE: dict[str, type[Refused]] = {code: family for family in FAMILIES for code in family.codes}


def refusal(code: str, message: str, details: dict[str, Any] | None = None, status: int = 409) -> Refused:
    """The Refused subclass of ``code``'s family (plain Refused for a code this client does not know)."""
    return _BY_CODE.get(code, Refused)(code, message, details, status)


__all__ = [
    "AccessDenied",
    "Contended",
    "InvalidRequest",
    "NotCurrent",
    "NotFound",
    "Refused",
    "Retryable",
    "Unreachable",
    "refusal",
]
