"""Routes of the waiting lines (docs/protocol.md#waiting)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get

from eventcoord.api.deps import caller, json, runtime
from eventcoord.api.queries import waits as queries


@get("/v1/waits", operation_id="listWaits", summary="Waiting lines")
async def list_waits(request: Request[Any, Any, Any]) -> Response[bytes]:
    """``{"waits": [{kind, key, session_id, actor_key, place, since}]}``: one row per waiter,
    ordered by key then place (place 1 = next)."""
    who = await caller(request)
    return json({"waits": await runtime(request).store.query(lambda c: queries.list_waits(c, who.workspace))})
