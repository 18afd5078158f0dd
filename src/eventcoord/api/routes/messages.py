"""Routes of messages: one channel, in order."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter

from eventcoord import errors
from eventcoord.api.deps import caller, json, runtime
from eventcoord.api.queries.messages import channel_messages
from eventcoord.sanitize import is_channel


@get("/v1/messages", operation_id="listMessages", summary="Messages of one channel, in order")
async def list_messages(
    request: Request[Any, Any, Any],
    channel: Annotated[str | None, Parameter(description="issue:<key>, agent:<session_id> or project:<key>")] = None,
    after: Annotated[int, Parameter(ge=0, description="exclusive position cursor")] = 0,
    limit: Annotated[int, Parameter(ge=1, description="page size, clamped to 1000")] = 100,
) -> Response[bytes]:
    """``{"messages": [{position, channel, body, session_id, actor_key, recorded_at}]}``."""
    who = await caller(request)
    if channel is None or not is_channel(channel):
        raise errors.invalid("channel", "channel must be issue:<key>, agent:<session_id> or project:<key>")
    rows = await runtime(request).store.query(
        lambda c: channel_messages(c, who.workspace, channel, after, min(limit, 1000))
    )
    return json({"messages": rows})
