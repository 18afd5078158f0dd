"""Routes of the event log: a page of it (``/v1/events``), or Server-Sent Events from a position, then live."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter
from litestar.response import Stream

from eventcoord.api.deps import caller, json, runtime
from eventcoord.outbox.follow import follow, sse_frame
from eventcoord.outbox.tail import KeepAlive

#: A comment line: keeps proxies and clients from timing out a quiet stream.
KEEP_ALIVE_FRAME = b": keep-alive\n\n"


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


@get("/v1/events/stream", operation_id="streamEvents", summary="Server-Sent Events: the log from a position, then live")
async def stream_events(
    request: Request[Any, Any, Any],
    after: Annotated[int | None, Parameter(ge=0, le=2**63 - 1, description="exclusive start position (default: Last-Event-ID or 0)")] = None,
    event_type: Annotated[list[str] | None, Parameter(query="type", description="only these event types (repeatable)")] = None,
) -> Stream:
    """Each event is one SSE message: ``id`` = position, ``event`` = type, ``data`` = wire JSON.

    Reconnecting clients send ``Last-Event-ID`` and resume exactly after it; ``type``
    (repeatable) keeps only those event types. A quiet
    stream gets a ``: keep-alive`` comment every ``EVENTCOORD_SSE_KEEPALIVE_SECONDS``
    (default 15). Every stream of a server process reads one shared tail of the log.
    """
    who = await caller(request)
    rt = runtime(request)
    start = after
    if start is None:
        last = request.headers.get("last-event-id", "0")
        start = int(last) if last.isdigit() else 0

    tail = rt.outbox.tail
    types = frozenset(event_type) if event_type else None

    async def frames() -> AsyncIterator[bytes]:
        yield b": eventcoord stream\n\n"
        if tail is None:  # a runtime built without a tail: follow the store directly
            async for ev in follow(rt.store, start, who.workspace, rt.outbox.signal):
                if types is None or ev.type in types:
                    yield sse_frame(ev)
            return
        async for item in tail.follow(start, who.workspace, types):
            yield KEEP_ALIVE_FRAME if isinstance(item, KeepAlive) else sse_frame(item)

    return Stream(frames(), media_type="text/event-stream", headers={"cache-control": "no-cache", "x-accel-buffering": "no"})

