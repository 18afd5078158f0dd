"""Read routes of the foundation: the event log, agents, health."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import MediaType, Request, Response, get
from litestar.params import Parameter
from sqlalchemy import Connection, select

from eventcoord.api.deps import caller, runtime
from eventcoord.codec import encode, format_time
from eventcoord.projections.tables import sessions
from eventcoord.store import log


class AgentView(msgspec.Struct, frozen=True, kw_only=True):
    """A session as ``GET /v1/agents`` shows it; liveness computed at read time."""

    session_id: str
    actor_key: str
    identity_source: str
    stable: bool
    kind: str
    host: str | None
    working_on: str | None
    live: bool
    registered_at: str
    last_heartbeat_at: str
    ended_at: str | None

    @classmethod
    def of(cls, r: Any, cutoff_us: int) -> AgentView:
        """A ``sessions`` row as seen now (live when not ended and seen after ``cutoff_us``)."""
        return cls(
            session_id=r.session_id,
            actor_key=r.actor_key,
            identity_source=r.identity_source,
            stable=r.stable,
            kind=r.kind,
            host=r.host,
            working_on=r.working_on,
            live=r.ended_us is None and r.last_seen_us > cutoff_us,
            registered_at=format_time(r.registered_us),
            last_heartbeat_at=format_time(r.last_seen_us),
            ended_at=format_time(r.ended_us) if r.ended_us is not None else None,
        )


def json(value: Any, status: int = 200) -> Response[bytes]:
    """A JSON response from any msgspec-encodable value."""
    return Response(encode(value), status_code=status, media_type=MediaType.JSON)


@get("/health", operation_id="health", summary="Readiness", exclude_from_auth=True)
async def health(request: Request[Any, Any, Any]) -> Response[bytes]:
    """200 when the service is ready; reports the head position and the relay's state."""
    rt = runtime(request)
    head = await rt.store.head()
    body: dict[str, Any] = {"status": "ok", "head": head, "backend": rt.store.dialect}
    relay = rt.extras.get("relay")
    body["relay"] = {**relay.status(), "nats_url": relay.nats_url} if relay is not None else {"state": "off"}
    return json(body)


@get("/v1/events", operation_id="listEvents", summary="The event log, in position order")
async def list_events(
    request: Request[Any, Any, Any],
    after: Annotated[int, Parameter(ge=0, le=2**63 - 1, description="exclusive lower bound")] = 0,
    limit: Annotated[int, Parameter(ge=1, description="page size, clamped to 1000")] = 100,
) -> Response[bytes]:
    """``{"events": [...]}``: the workspace's events with position > ``after``."""
    who = await caller(request)
    events = await runtime(request).store.read(after, min(limit, 1000), who.workspace)
    return json({"events": events})


@get("/v1/agents", operation_id="listAgents", summary="Agent sessions with liveness")
async def list_agents(
    request: Request[Any, Any, Any],
    live: Annotated[bool | None, Parameter(description="only live (true) or only not live (false)")] = None,
    limit: Annotated[int, Parameter(ge=1, le=10000)] = 1000,
) -> Response[bytes]:
    """``{"agents": [...]}`` of the caller's workspace, newest first."""
    who = await caller(request)

    def run(conn: Connection) -> list[AgentView]:
        now_us, ttl = log.clock(conn)
        cutoff = now_us - ttl * 1_000_000
        stmt = select(sessions).where(sessions.c.workspace == who.workspace)
        if live is True:
            stmt = stmt.where(sessions.c.ended_us.is_(None) & (sessions.c.last_seen_us > cutoff))
        elif live is False:
            stmt = stmt.where(sessions.c.ended_us.is_not(None) | (sessions.c.last_seen_us <= cutoff))
        rows = conn.execute(stmt.order_by(sessions.c.registered_us.desc()).limit(limit))
        return [AgentView.of(r, cutoff) for r in rows]

    return json({"agents": await runtime(request).store.query(run)})


@get("/metrics", operation_id="metrics", summary="Prometheus metrics", exclude_from_auth=True)
async def prometheus_metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Prometheus exposition: commands by type and outcome, latency, log head, relay lag."""
    from eventcoord import metrics

    relay = runtime(request).extras.get("relay")
    if relay is not None:
        metrics.RELAY_LAG.set(relay.status().get("lag", 0))
    return Response(metrics.render(), media_type="text/plain; version=0.0.4")


ROUTES = [health, list_events, list_agents, prometheus_metrics]
