"""Routes of the work queue: items with their audit ledger."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter

from eventcoord.api.deps import caller, json, runtime
from eventcoord.api.queries import queue as queries
from eventcoord.api.queries.queue import Status


@get("/v1/queue", operation_id="listQueue", summary="Work items with their audit history")
async def list_queue(
    request: Request[Any, Any, Any],
    project: Annotated[str | None, Parameter(description="only this project")] = None,
    status: Annotated[Status | None, Parameter(description="only items in this status")] = None,
    after: Annotated[int, Parameter(ge=0, description="only items enqueued at a position after this")] = 0,
    limit: Annotated[int, Parameter(ge=1, le=10000)] = 1000,
    as_of: Annotated[
        str | None, Parameter(description="As of a position or an RFC 3339 time (docs/protocol.md#history)")
    ] = None,
) -> Response[bytes]:
    """``{"items": [...]}`` in enqueue order; each item carries ``history``: every
    transition from the ledger with the session, actor and host that made it, when, and
    its detail (fencing token, outcome, or re-queue reason)."""
    who = await caller(request)
    if as_of is not None:
        then, moment = await runtime(request).history.read_upto(
            who.workspace,
            as_of,
            lambda c, p: queries.list_queue(c, who.workspace, project, status, after, limit, upto=p),
        )
        return json({"items": then, "as_of": moment})
    items = await runtime(request).store.query(
        lambda c: queries.list_queue(c, who.workspace, project, status, after, limit)
    )
    return json({"items": items})
