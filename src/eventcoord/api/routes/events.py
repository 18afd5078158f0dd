"""Routes of the event log: a page of it (``/v1/events``), or Server-Sent Events from a position, then live."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter
from litestar.response import Stream

from eventcoord import errors
from eventcoord.api.deps import caller, json, runtime
from eventcoord.api.params import INT_MAX
from eventcoord.outbox.follow import follow, sse_frame


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


def last_event_id(value: str | None) -> int:
    """The position a reconnecting client saw last: a decimal position, or 0 when absent.

    Anything else (not a position, or past the signed 64-bit range) is 422 ``VALIDATION``.
    """
    if value is None or not value.strip():
        return 0
    v = value.strip()
    if not (v.isascii() and v.isdigit()) or int(v) > INT_MAX:
        raise errors.invalid("Last-Event-ID", f"Last-Event-ID must be a position between 0 and {INT_MAX}")
    return int(v)


@get("/v1/events/stream", operation_id="streamEvents", summary="Server-Sent Events: the log from a position, then live")
async def stream_events(
    request: Request[Any, Any, Any],
    after: Annotated[int | None, Parameter(ge=0, le=2**63 - 1, description="exclusive start position (default: Last-Event-ID or 0)")] = None,
) -> Stream:
    """Each event is one SSE message: ``id`` = position, ``event`` = type, ``data`` = wire JSON.

    Reconnecting clients send ``Last-Event-ID`` and resume exactly after it.
    """
    who = await caller(request)
    rt = runtime(request)
    start = after
    if start is None:
        start = last_event_id(request.headers.get("last-event-id"))

    async def frames() -> AsyncIterator[bytes]:
        yield b": eventcoord stream\n\n"
        async for ev in follow(rt.store, start, who.workspace, rt.outbox.signal):
            yield sse_frame(ev)

    return Stream(frames(), media_type="text/event-stream", headers={"cache-control": "no-cache", "x-accel-buffering": "no"})

