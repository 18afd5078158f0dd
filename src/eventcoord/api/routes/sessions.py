"""Routes of sessions: agents with their liveness, one agent and what it worked on."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter

from eventcoord import errors
from eventcoord.api.deps import caller, json, runtime
from eventcoord.api.queries.sessions import LIST_AGENTS_TABLES, agent_detail
from eventcoord.api.queries.sessions import list_agents as query_agents


@get("/v1/agents", operation_id="listAgents", summary="Agent sessions with liveness")
async def list_agents(
    request: Request[Any, Any, Any],
    live: Annotated[bool | None, Parameter(description="only live (true) or only not live (false)")] = None,
    limit: Annotated[int, Parameter(ge=1, le=10000)] = 1000,
    as_of: Annotated[
        str | None, Parameter(description="As of a position or an RFC 3339 time (docs/protocol.md#history)")
    ] = None,
) -> Response[bytes]:
    """``{"agents": [...]}`` of the caller's workspace, newest first.

    With ``as_of``: as they were then, with ``as_of: {position, at}``.
    """
    who = await caller(request)
    if as_of is not None:
        rows, moment = await runtime(request).history.read(
            who.workspace,
            as_of,
            lambda c: query_agents(c, who.workspace, live, limit),
            history=True,  # ended sessions are history rows, and this read lists them
            tables=LIST_AGENTS_TABLES,
        )
        return json({"agents": rows, "as_of": moment})
    return json({"agents": await runtime(request).store.query(lambda c: query_agents(c, who.workspace, live, limit))})


@get("/v1/agents/{session_id:str}", operation_id="getAgent", summary="One session and what it worked on")
async def get_agent(request: Request[Any, Any, Any], session_id: str) -> Response[bytes]:
    """``{"agent", "work", "leases", "named_leases"}``: the session with its liveness, the
    work items it claimed, ran or finished (with its own ledger entries), every issue lease
    it was granted (released or not) and the named leases it holds now. 404 if the session
    is not in the caller's workspace."""
    who = await caller(request)
    body = await runtime(request).store.query(lambda c: agent_detail(c, who.workspace, session_id))
    if body is None:
        raise errors.session_not_found(session_id)
    return json(body)
