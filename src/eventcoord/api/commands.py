"""POST /v1/commands: the one endpoint for every write."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response, post

from eventcoord.api.deps import caller, runtime
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
    who = await caller(request)
    # Decode ourselves from the raw bytes: one msgspec pass, and errors name the field.
    cmd = decode_command(await request.body())
    answer = await runtime(request).service.execute(who, cmd, request.headers.get("x-correlation-id"))
    return Response(answer.body, status_code=answer.status, media_type=MediaType.JSON)
