"""Routes of named leases (leader election)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get

from eventcoord.api.deps import caller, json, runtime
from eventcoord.api.queries import named_leases as queries


@get("/v1/named-leases", operation_id="listNamedLeases", summary="Named leases (leader election)")
async def list_named_leases(request: Request[Any, Any, Any]) -> Response[bytes]:
    """``{"leases": [...]}``: every name ever granted, its holder (null once released),
    last fencing token, and whether it is held now (a holder and not yet expired)."""
    who = await caller(request)
    return json({"leases": await runtime(request).store.query(lambda c: queries.list_named_leases(c, who.workspace))})
