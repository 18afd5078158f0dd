"""Routes of issue leases: the effective state of an issue, the unreleased leases."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter

from eventcoord import errors
from eventcoord.api.deps import caller, json, runtime
from eventcoord.api.queries import issues as queries
from eventcoord.sanitize import is_key


@get(
    "/v1/issues/{issue_path:path}",
    operation_id="issueState",
    summary="Effective state of an issue: /v1/issues/{issue}/state",
)
async def issue_state(
    request: Request[Any, Any, Any],
    issue_path: str,
    as_: Annotated[str | None, Parameter(query="as", description="the session asking")] = None,
    as_of: Annotated[
        str | None, Parameter(description="As of a position or an RFC 3339 time (docs/protocol.md#history)")
    ] = None,
) -> Response[bytes]:
    """``{issue, state, reason, holder}``: assignment joined with liveness, as ``as`` sees it."""
    who = await caller(request)
    # Issue keys may hold "/", so the key is everything between /v1/issues/ and /state.
    path = issue_path.lstrip("/")
    if not path.endswith("/state"):
        raise errors.not_found("use /v1/issues/{issue}/state")
    issue = path[: -len("/state")]
    if not is_key(issue):
        raise errors.invalid("issue", "issue keys match [A-Za-z0-9][A-Za-z0-9._:/#-]{0,127}")
    if as_of is not None:
        state, moment = await runtime(request).history.read_about(
            who.workspace,
            as_of,
            lambda c: queries.issue_state(c, who, issue, as_),
            **queries.about_issue(issue),
        )
        return json({**state, "as_of": moment})
    return json(await runtime(request).store.query(lambda c: queries.issue_state(c, who, issue, as_)))


@get("/v1/leases", operation_id="listLeases", summary="Unreleased issue leases with their holders' liveness")
async def list_leases(
    request: Request[Any, Any, Any],
    project: Annotated[str | None, Parameter(description="only this project")] = None,
    session: Annotated[str | None, Parameter(description="only this holder session")] = None,
    limit: Annotated[int | None, Parameter(ge=1, le=10000, description="at most this many (default: all)")] = None,
    as_of: Annotated[
        str | None, Parameter(description="As of a position or an RFC 3339 time (docs/protocol.md#history)")
    ] = None,
) -> Response[bytes]:
    """``{"leases": [{issue, project, session_id, actor_key, fencing_token, live, kind, granted_at}]}``."""
    who = await caller(request)
    if as_of is not None:
        rows, moment = await runtime(request).history.read(
            who.workspace,
            as_of,
            lambda c: queries.list_leases(c, who.workspace, project, session, limit),
            history=False,  # unreleased leases only: no history rows needed
            tables=queries.LIST_LEASES_TABLES,
        )
        return json({"leases": rows, "as_of": moment})
    return json(
        {
            "leases": await runtime(request).store.query(
                lambda c: queries.list_leases(c, who.workspace, project, session, limit)
            )
        }
    )
