"""Following the log live, and its Server-Sent Events framing (``/v1/events/stream``).

Catch-up and live are one loop: read after the last position seen, yield, repeat; when
nothing is left, wait for a commit signal (or a short poll, for other replicas' commits).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from eventcoord.codec import WireEvent, encode
from eventcoord.store.base import EventStore

#: How often a follower re-reads the log without a signal (commits of other replicas).
POLL_INTERVAL = 0.2
#: Events read per query while catching up.
PAGE = 500


async def follow(
    store: EventStore,
    after: int = 0,
    workspace: str | None = None,
    poll: asyncio.Event | None = None,
    *,
    poll_interval: float = POLL_INTERVAL,
) -> AsyncIterator[WireEvent]:
    """Yield every event with position > ``after`` (of ``workspace``, if given), then live.

    Positions are contiguous and commit-ordered, so reading "after the last one yielded"
    never skips an event committed late. ``poll`` is a commit signal shared by many
    followers: the committer *pulses* it (:func:`pulse`), which wakes every waiter; a
    follower never clears it. Without a signal, or if it is left set, this polls every
    ``poll_interval`` seconds.
    """
    position = after
    while True:
        batch = await store.read(after=position, limit=PAGE, workspace=workspace)
        for ev in batch:
            position = ev.position
            yield ev
        if len(batch) == PAGE:
            continue
        if poll is None or poll.is_set():
            await asyncio.sleep(poll_interval)
        else:
            # asyncio.timeout: wait_for (3.11) can swallow the cancel of a closing stream.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll_interval):
                    await poll.wait()


def pulse(signal: asyncio.Event) -> None:
    """Wake every coroutine waiting on ``signal`` now, without leaving it set."""
    signal.set()
    signal.clear()


def sse_frame(ev: WireEvent) -> bytes:
    """One Server-Sent Event: ``id`` = position (clients resume with ``Last-Event-ID``),
    ``event`` = the event type, ``data`` = the wire JSON."""
    data = encode(ev)
    # Compact JSON never holds a raw newline, but SSE needs one data line per line if it did.
    lines = b"".join(b"data: " + line + b"\n" for line in data.split(b"\n"))
    return b"id: %d\nevent: %s\n%s\n" % (ev.position, ev.type.encode(), lines)
