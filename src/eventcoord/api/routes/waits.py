"""Routes of the waiting lines (docs/protocol.md#waiting)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter

from eventcoord.api.deps import caller, json, runtime
from eventcoord.api.queries import waits as queries


@get("/v1/waits", operation_id="listWaits", summary="Waiting lines")
async def list_waits(
    request: Request[Any, Any, Any],
    after: Annotated[
        str | None,
        Parameter(max_length=queries.CURSOR_MAX, description="the `next` of the previous page: go on after it"),
    ] = None,
    limit: Annotated[int, Parameter(ge=1, le=10000)] = 1000,
) -> Response[bytes]:
    """``{"waits": [{kind, key, session_id, actor_key, place, since}], "next": ...}``: one row
    per waiter, ordered by key then place (place 1 = next), ``limit`` at a time; ``next`` is
    the ``after`` of the following page, null on the last."""
    who = await caller(request)
    rows, following = await runtime(request).store.query(lambda c: queries.list_waits(c, who.workspace, after, limit))
    return json({"waits": rows, "next": following})
