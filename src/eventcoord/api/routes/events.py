"""Routes of the event log: a page of it (``/v1/events``), or Server-Sent Events from a position, then live."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter
from litestar.response import Stream

from eventcoord import errors
from eventcoord.api.deps import caller, json, runtime
from eventcoord.api.params import INT_MAX
from eventcoord.codec import parse_time
from eventcoord.events import EVENT_TYPES
from eventcoord.history.logreads import Filters, page
from eventcoord.outbox.follow import follow, sse_frame
from eventcoord.outbox.tail import KeepAlive

#: A comment line: keeps proxies and clients from timing out a quiet stream.
KEEP_ALIVE_FRAME = b": keep-alive\n\n"
#: The last line of a stream whose token was revoked (a reconnect then meets 401).
REVOKED_FRAME = b": token revoked\n\n"


async def until_revoked(frames: AsyncGenerator[bytes, None], revoked: asyncio.Event) -> AsyncIterator[bytes]:
    """``frames`` until they end or ``revoked`` is set, even while they wait for an event."""
    stop = asyncio.ensure_future(revoked.wait())
    step: asyncio.Future[bytes] | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(frames))
            await asyncio.wait((step, stop), return_when=asyncio.FIRST_COMPLETED)
            if not step.done():  # revoked while the stream waited: end it where it waits
                yield REVOKED_FRAME
                return
            try:
                frame = step.result()
            except StopAsyncIteration:
                return
            step = None
            yield frame
            if revoked.is_set():
                yield REVOKED_FRAME
                return
    finally:
        # The generator may be waiting inside ``step``: stop it there before closing it.
        stop.cancel()
        if step is not None and not step.done():
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await step
        await frames.aclose()


def parse_filters(types: list[str] | None, stream: str | None, since: str | None, until: str | None) -> Filters:
    """The log's filters (docs/protocol.md#history) from the query; a bad one is 422 VALIDATION naming it."""
    for t in types or ():
        if t not in EVENT_TYPES:
            raise errors.invalid("type", f"unknown event type {t!r}")
    if stream is not None and not 1 <= len(stream) <= 200:
        raise errors.invalid("stream", "stream must be 1..200 characters")
    times: dict[str, int | None] = {}
    for name, value in (("since", since), ("until", until)):
        try:
            times[name] = None if value is None else parse_time(value)
        except (ValueError, OverflowError):
            raise errors.invalid(name, f"{name} must be an RFC 3339 time, got {value!r}") from None
    lo, hi = times["since"], times["until"]
    if lo is not None and hi is not None and lo > hi:
        raise errors.invalid("until", "until is before since")
    return Filters(types=tuple(types or ()), stream=stream, since_us=lo, until_us=hi)


@get("/v1/events", operation_id="listEvents", summary="The event log, in position order")
async def list_events(
    request: Request[Any, Any, Any],
    after: Annotated[int, Parameter(ge=0, le=2**63 - 1, description="exclusive lower bound")] = 0,
    limit: Annotated[int, Parameter(ge=1, description="page size, clamped to 1000")] = 100,
    types: Annotated[
        list[str] | None, Parameter(query="type", description="only events of this type (repeatable)")
    ] = None,
    stream: Annotated[str | None, Parameter(description="only events of this stream")] = None,
    since: Annotated[str | None, Parameter(description="RFC 3339 on recorded_at, inclusive")] = None,
    until: Annotated[str | None, Parameter(description="RFC 3339 on recorded_at, exclusive")] = None,
) -> Response[bytes]:
    """``{"events": [...]}``: the workspace's events with position > ``after``, optionally
    filtered (docs/protocol.md#history); filters never reorder, ``after``/``limit`` page as before."""
    who = await caller(request)
    f = parse_filters(types, stream, since, until)
    events = await runtime(request).store.query(lambda c: page(c, after, min(limit, 1000), who.workspace, f))
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
    after: Annotated[
        int | None, Parameter(ge=0, le=2**63 - 1, description="exclusive start position (default: Last-Event-ID or 0)")
    ] = None,
    event_type: Annotated[
        list[str] | None, Parameter(query="type", description="only these event types (repeatable)")
    ] = None,
) -> Stream:
    """Each event is one SSE message: ``id`` = position, ``event`` = type, ``data`` = wire JSON.

    Reconnecting clients send ``Last-Event-ID`` and resume exactly after it; ``type``
    (repeatable) keeps only those event types. A quiet
    stream gets a ``: keep-alive`` comment every ``EVENTCOORD_SSE_KEEPALIVE_SECONDS``
    (default 15). Every stream of a server process reads one shared tail of the log. The
    stream ends within 2 s after its token is revoked, on every replica.
    """
    who = await caller(request)
    rt = runtime(request)
    start = after
    if start is None:
        start = last_event_id(request.headers.get("last-event-id"))

    tail = rt.outbox.tail
    types = frozenset(event_type) if event_type else None

    async def frames() -> AsyncGenerator[bytes, None]:
        if tail is None:  # a runtime built without a tail: follow the store directly
            async for ev in follow(rt.store, start, who.workspace, rt.outbox.signal):
                if types is None or ev.type in types:
                    yield sse_frame(ev)
            return
        async for item in tail.follow(start, who.workspace, types):
            yield KEEP_ALIVE_FRAME if isinstance(item, KeepAlive) else sse_frame(item)

    async def watched() -> AsyncIterator[bytes]:
        yield b": eventcoord stream\n\n"
        if who.token_id is None:  # a caller from before tokens had ids: nothing to watch
            async for frame in frames():
                yield frame
            return
        with rt.revocations.watch(who.token_id) as revoked:
            async for frame in until_revoked(frames(), revoked):
                yield frame

    return Stream(
        watched(), media_type="text/event-stream", headers={"cache-control": "no-cache", "x-accel-buffering": "no"}
    )
