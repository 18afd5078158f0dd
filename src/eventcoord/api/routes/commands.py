"""POST /v1/commands: the one endpoint for every write."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, post
from litestar.types import ASGIApp

from eventcoord import errors
from eventcoord.api.answers import outcome_response
from eventcoord.api.body import read_body
from eventcoord.api.deps import runtime
from eventcoord.codec import decode_command


def is_json(content_type: str) -> bool:
    """``application/json`` (any parameters, e.g. ``charset=utf-8``) or a ``+json`` type.

    A request without a Content-Type is read as JSON too (``curl --data-binary``, raw
    sockets); one that names anything else is 415 UNSUPPORTED_MEDIA_TYPE.
    """
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


@post(
    "/v1/commands",
    operation_id="postCommand",
    summary="Send a command",
    status_code=200,
    media_type=MediaType.JSON,
)
async def post_command(request: Request[Any, Any, Any]) -> ASGIApp:
    """Decode, authorise, decide, append and answer one command (SPEC §3).

    The body is a JSON object tagged by ``type``. Success is
    ``{"ok": true, "result", "events", "position"}``; a refusal is the error envelope
    with a stable code. ``command_id`` makes a command idempotent.
    """
    # The hot path reads the headers it needs from the raw ASGI scope (no Headers object),
    # reads the body from the ASGI channel (``api/body.py``) and decodes it itself: one
    # msgspec pass, errors name the field.
    authorization = correlation_id = content_type = content_length = None
    for name, value in request.scope["headers"]:
        if name == b"authorization":
            authorization = value.decode("latin-1")
        elif name == b"x-correlation-id":
            correlation_id = value.decode("latin-1")[:128]
        elif name == b"content-type":
            content_type = value.decode("latin-1")
        elif name == b"content-length":
            content_length = value
    rt = runtime(request)
    who = await rt.auth.authenticate(authorization)
    if content_type is not None and not is_json(content_type):
        raise errors.unsupported_media_type(content_type)
    cmd = decode_command(await read_body(request.receive, content_length))
    return outcome_response(await rt.service.execute(who, cmd, correlation_id))
