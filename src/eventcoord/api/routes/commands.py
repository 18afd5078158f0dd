"""POST /v1/commands: the one endpoint for every write."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response, post

from eventcoord.api.answers import outcome_response
from eventcoord.api.deps import runtime
from eventcoord.codec import decode_command


@post(
    "/v1/commands",
    operation_id="postCommand",
    summary="Send a command",
    status_code=200,
    media_type=MediaType.JSON,
)
async def post_command(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Decode, authorise, decide, append and answer one command (SPEC §3).

    The body is a JSON object tagged by ``type``. Success is
    ``{"ok": true, "result", "events", "position"}``; a refusal is the error envelope
    with a stable code. ``command_id`` makes a command idempotent.
    """
    # The hot path reads the two headers it needs from the raw ASGI scope (no Headers
    # object), and decodes the body itself: one msgspec pass, errors name the field.
    authorization = correlation_id = None
    for name, value in request.scope["headers"]:
        if name == b"authorization":
            authorization = value.decode("latin-1")
        elif name == b"x-correlation-id":
            correlation_id = value.decode("latin-1")[:128]
    rt = runtime(request)
    who = await rt.auth.authenticate(authorization)
    cmd = decode_command(await request.body())
    return outcome_response(await rt.service.execute(who, cmd, correlation_id))
