"""Read routes of the issue tier: effective state and leases."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter
from sqlalchemy import Connection, select

from eventcoord.api.deps import caller, runtime
from eventcoord.api.reads import json
from eventcoord.codec import format_time
from eventcoord.context import Context
from eventcoord.domain.leases import effective_state
from eventcoord.handlers.leases import load_issue_view
from eventcoord.projections.tables import leases, sessions
from eventcoord.sanitize import KEY_PATTERN
from eventcoord.store import log


@get("/v1/issues/{issue_path:path}", operation_id="issueState", summary="Effective state of an issue: /v1/issues/{issue}/state")
async def issue_state(
    request: Request[Any, Any, Any],
    issue_path: str,
    as_: Annotated[str | None, Parameter(query="as", description="the session asking")] = None,
) -> Response[bytes]:
    """``{issue, state, reason, holder}``: assignment joined with liveness, as ``as`` sees it."""
    who = await caller(request)
    import re

    from eventcoord.errors import DomainError, ValidationFailed

    # Issue keys may hold "/", so the key is everything between /v1/issues/ and /state.
    path = issue_path.lstrip("/")
    if not path.endswith("/state"):
        raise DomainError("NOT_FOUND", "use /v1/issues/{issue}/state")
    issue = path[: -len("/state")]
    if not re.match(KEY_PATTERN, issue):
        raise ValidationFailed("issue", "issue keys match [A-Za-z0-9][A-Za-z0-9._:/#-]{0,127}")

    def run(conn: Connection) -> dict[str, Any]:
        now_us, ttl = log.clock(conn)
        ctx = Context(who, now_us, ttl)
        view = load_issue_view(conn, ctx, issue)
        es = effective_state(view, as_, ctx)
        lease = view.lease
        return {
            "issue": issue,
            "state": es.state,
            "reason": es.reason,
            "holder": es.holder,
            "fencing_token": lease.fencing_token if lease else None,
            "project": view.registry.project if view.registry else None,
        }

    return json(await runtime(request).store.query(run))


@get("/v1/leases", operation_id="listLeases", summary="Unreleased issue leases with their holders' liveness")
async def list_leases(
    request: Request[Any, Any, Any],
    project: Annotated[str | None, Parameter(description="only this project")] = None,
    session: Annotated[str | None, Parameter(description="only this holder session")] = None,
    limit: Annotated[int | None, Parameter(ge=1, le=10000, description="at most this many (default: all)")] = None,
) -> Response[bytes]:
    """``{"leases": [{issue, project, session_id, actor_key, fencing_token, live, kind, granted_at}]}``."""
    who = await caller(request)

    def run(conn: Connection) -> list[dict[str, Any]]:
        now_us, ttl = log.clock(conn)
        cutoff = now_us - ttl * 1_000_000
        stmt = (
            select(leases, sessions.c.last_seen_us, sessions.c.ended_us, sessions.c.kind)
            .select_from(leases.outerjoin(sessions, sessions.c.session_id == leases.c.session_id))
            .where((leases.c.workspace == who.workspace) & leases.c.released_us.is_(None))
        )
        if project:
            stmt = stmt.where(leases.c.project == project)
        if session:
            stmt = stmt.where(leases.c.session_id == session)
        return [
            {
                "issue": r.issue,
                "project": r.project,
                "session_id": r.session_id,
                "actor_key": r.actor_key,
                "fencing_token": r.fencing_token,
                "live": r.ended_us is None and r.last_seen_us is not None and r.last_seen_us > cutoff,
                "kind": r.kind,
                "granted_at": format_time(r.granted_us),
            }
            for r in conn.execute(stmt.order_by(leases.c.project, leases.c.issue).limit(limit))
        ]

    return json({"leases": await runtime(request).store.query(run)})


ROUTES = [issue_state, list_leases]
