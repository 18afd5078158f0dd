"""POST /v1/commands: the one endpoint for every write."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litestar import Request, asgi
from litestar.exceptions import MethodNotAllowedException
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

from eventcoord import errors
from eventcoord.api import params
from eventcoord.api.answers import outcome_response
from eventcoord.api.body import read_body
from eventcoord.api.ratelimit import vouch
from eventcoord.codec import decode_command

if TYPE_CHECKING:
    from eventcoord.bootstrap import Runtime


def is_json(content_type: str) -> bool:
    """``application/json`` (any parameters, e.g. ``charset=utf-8``) or a ``+json`` type.

    A request without a Content-Type is read as JSON too (``curl --data-binary``, raw
    sockets); one that names anything else is 415 UNSUPPORTED_MEDIA_TYPE.
    """
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


#: What an OPTIONS request to the endpoint is told: 204 and the methods it allows.
_OPTIONS: HTTPResponseStartEvent = {
    "type": "http.response.start",
    "status": 204,
    "headers": [(b"allow", b"OPTIONS, POST")],
}
_EMPTY: HTTPResponseBodyEvent = {"type": "http.response.body", "body": b"", "more_body": False}


# An ASGI route: the app's middleware (rate limits) and exception handlers apply as to every
# route, but Litestar builds no Request, signature model or Response for it, and runs no
# before_request hook. Those cost 8 to 15 µs of a command (bench/route_kinds.py), where
# the handler already read what it needs from the raw scope and channel and sends its own
# answer (``answers.CommandAnswer``). Its OpenAPI operation is written by ``api/openapi.py``:
# Litestar leaves ASGI routes out of the schema.
@asgi("/v1/commands", name="postCommand", copy_scope=False)
async def post_command(scope: Scope, receive: Receive, send: Send) -> None:
    """Decode, authorise, decide, append and answer one command (docs/protocol.md#the-command-endpoint).

    The body is a JSON object tagged by ``type``. Success is
    ``{"ok": true, "result", "events", "position"}``; a refusal is the error envelope
    with a stable code. ``command_id`` makes a command idempotent.
    """
    method = scope.get("method")  # a WebSocket scope has none
    if method != "POST":
        if method == "OPTIONS":  # as Litestar answers it for every HTTP route
            await send(_OPTIONS)
            await send(_EMPTY)
            return
        raise MethodNotAllowedException(f"{method or 'a WebSocket'} on /v1/commands: only POST")
    if scope["query_string"]:  # none is read, but one no store could take is refused alike
        params.check(Request(scope, receive))
    # The headers it needs, read from the raw scope (no Headers object); the body from the
    # ASGI channel (``api/body.py``), decoded in one msgspec pass whose errors name the field.
    authorization = correlation_id = content_type = content_length = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            authorization = value.decode("latin-1")
        elif name == b"x-correlation-id":
            correlation_id = value.decode("latin-1")[:128]
        elif name == b"content-type":
            content_type = value.decode("latin-1")
        elif name == b"content-length":
            content_length = value
    rt: Runtime = scope["litestar_app"].state.runtime
    who = await rt.auth.authenticate(authorization)
    vouch(scope)
    if content_type is not None and not is_json(content_type):
        raise errors.unsupported_media_type(content_type)
    cmd = decode_command(await read_body(receive, content_length))
    answer = outcome_response(await rt.service.execute(who, cmd, correlation_id))
    await answer(scope, receive, send)
