"""The answer envelope of SPEC §3, encoded here and nowhere else.

Success is ``{"ok": true, "result", "events", "position"}``; a refusal is
``{"ok": false, "error": {"code", "message", "details"}}``, with ``events`` and
``position`` when the refusal was recorded (``WipCapDenied``, ``ClaimConflict``).
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import MediaType, Response

from eventcoord.codec import encode
from eventcoord.errors import DomainError
from eventcoord.service import EventRef, Outcome


class _Ok(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool = True
    result: Any
    events: list[EventRef]
    position: int


class ErrorBody(msgspec.Struct, frozen=True, kw_only=True):
    """The error member of the error envelope."""

    code: str
    message: str
    details: dict[str, Any] = {}


class _Err(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    ok: bool  # no default, so it is always written
    error: ErrorBody
    events: list[EventRef] = []
    position: int | None = None


def error_body(e: DomainError, refs: list[EventRef] | None = None, position: int | None = None) -> bytes:
    """The error envelope for ``e`` (with the events a recorded refusal appended)."""
    body = ErrorBody(code=str(e.code), message=e.message, details=e.details)
    return encode(_Err(ok=False, error=body, events=refs or [], position=position))


def outcome_response(outcome: Outcome) -> Response[bytes]:
    """A command's answer: 200 with its result, or its refusal's status and envelope."""
    e = outcome.refusal
    if e is None:
        body = encode(_Ok(result=outcome.result, events=outcome.events, position=outcome.position))
        return Response(body, status_code=200, media_type=MediaType.JSON)
    headers = None if e.retry_after is None else {"retry-after": str(e.retry_after)}
    return Response(
        error_body(e, outcome.events, outcome.position),
        status_code=e.status,
        media_type=MediaType.JSON,
        headers=headers,
    )


def error_response(e: DomainError) -> Response[bytes]:
    """A refusal that recorded nothing (with ``Retry-After`` when it asks for a wait)."""
    headers = None if e.retry_after is None else {"retry-after": str(e.retry_after)}
    return Response(error_body(e), status_code=e.status, media_type=MediaType.JSON, headers=headers)
