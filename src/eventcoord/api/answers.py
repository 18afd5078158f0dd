"""The answer envelope (docs/protocol.md#the-command-endpoint), encoded here and nowhere else.

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


class CommandAnswer:
    """A command's answer, as the ASGI application that sends it: a JSON body and its status.

    ``POST /v1/commands`` returns it as is, so Litestar sends it without building a
    ``Response`` and converting it to an ``ASGIResponse`` (header normalisation, cookies,
    background tasks, ``isinstance`` checks against typing generics: ~20 µs a request here,
    a tenth of a heartbeat's server time). None of that applies to this endpoint: it sets
    no cookies, runs no background task, and the app adds no response headers.
    """

    __slots__ = ("_start", "content", "status_code")

    def __init__(self, content: bytes, status_code: int, retry_after: int | None = None) -> None:
        self.content = content
        self.status_code = status_code
        headers = [(b"content-type", _JSON), (b"content-length", str(len(content)).encode())]
        if retry_after is not None:
            headers.append((b"retry-after", str(retry_after).encode()))
        self._start = {"type": "http.response.start", "status": status_code, "headers": headers}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(self._start)
        await send({"type": "http.response.body", "body": self.content, "more_body": False})


_JSON = MediaType.JSON.value.encode()


def outcome_response(outcome: Outcome) -> CommandAnswer:
    """A command's answer: 200 with its result, or its refusal's status and envelope."""
    e = outcome.refusal
    if e is None:
        return CommandAnswer(encode(_Ok(result=outcome.result, events=outcome.events, position=outcome.position)), 200)
    return CommandAnswer(error_body(e, outcome.events, outcome.position), e.status, e.retry_after)


def error_response(e: DomainError) -> Response[bytes]:
    """A refusal that recorded nothing (with ``Retry-After`` when it asks for a wait)."""
    headers = None if e.retry_after is None else {"retry-after": str(e.retry_after)}
    return Response(error_body(e), status_code=e.status, media_type=MediaType.JSON, headers=headers)
