"""Routes for operators: readiness (``/health``) and Prometheus metrics (``/metrics``)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get

from eventcoord import errors, metrics
from eventcoord.api.deps import json, runtime
from eventcoord.errors import StoreError


@get("/health", operation_id="health", summary="Readiness", exclude_from_auth=True)
async def health(request: Request[Any, Any, Any]) -> Response[bytes]:
    """200 when the service is ready; reports the head position and the relay's state.

    503 ``{"status": "unavailable", "cause": ...}`` with ``Retry-After`` while the database
    cannot be reached (the cause names it), carrying the error envelope's ``STORE_UNAVAILABLE``
    as every other route does then (docs/protocol.md#errors); 200 again once it is back,
    without a restart.
    """
    rt = runtime(request)
    try:
        head = await rt.store.head()
    except StoreError as e:
        refusal = errors.store_unavailable()
        down: dict[str, Any] = {
            "ok": False,
            "error": {"code": str(refusal.code), "message": refusal.message, "details": {}},
            "status": "unavailable",
            "cause": f"store ({rt.store.dialect}): {e}",
            "backend": rt.store.dialect,
        }
        response = json(down, status=503)
        response.headers["retry-after"] = str(refusal.retry_after)
        return response
    body: dict[str, Any] = {"status": "ok", "head": head, "backend": rt.store.dialect}
    relay = rt.outbox.relay
    body["relay"] = {**relay.status(), "nats_url": relay.nats_url} if relay is not None else {"state": "off"}
    return json(body)


@get("/metrics", operation_id="metrics", summary="Prometheus metrics", exclude_from_auth=True)
async def prometheus_metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Prometheus exposition: commands by type and outcome, latency, log head, relay lag."""
    outbox = runtime(request).outbox
    if outbox.relay is not None:
        metrics.RELAY_LAG.set(outbox.relay.status().get("lag", 0))
    if outbox.tail is not None:
        metrics.SSE_STREAMS.set(outbox.tail.followers)
    return Response(metrics.render(), media_type="text/plain; version=0.0.4")
