"""A Python consumer of eventcoord's JetStream stream: decoded wire events after a position.

Uses an ordered, ephemeral push consumer (no server-side state to clean up, gaps
detected and repaired by the client) that starts at the first message after ``after``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

import msgspec
import nats
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

from eventcoord.codec import WireEvent

_decoder = msgspec.json.Decoder(WireEvent)
#: How often to look again for a stream that does not exist yet, in seconds.
STREAM_WAIT = 0.25
#: Messages buffered between the client and the caller; a slow caller applies backpressure.
QUEUE_SIZE = 10_000


async def subscribe(
    nats_url: str,
    workspace: str = "*",
    types: Sequence[str] | None = None,
    after: int = 0,
    stream: str = "EVENTCOORD",
) -> AsyncIterator[WireEvent]:
    """Yield the stream's events with position > ``after``, in position order, then live.

    ``workspace="*"`` means every workspace; ``types`` filters on event type (server-side).
    If the stream does not exist yet (the service creates it on first start), this waits.
    Positions are the ``Nats-Msg-Id`` of each message; anything at or below the last
    position yielded is skipped, so redeliveries never reach the caller twice.
    """
    nc = await nats.connect(nats_url, max_reconnect_attempts=-1, reconnect_time_wait=0.5)
    try:
        js = nc.jetstream()
        subjects = [f"eventcoord.{workspace}.{t}" for t in types] if types else [f"eventcoord.{workspace}.>"]
        start = await start_sequence(js, stream, after)
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE if start else api.DeliverPolicy.ALL,
            opt_start_seq=start or None,
            filter_subjects=subjects if len(subjects) > 1 else None,
        )
        # A callback feeding our own queue, not next_msg(): next_msg makes a task per message.
        inbox: asyncio.Queue[Msg] = asyncio.Queue(maxsize=QUEUE_SIZE)
        await js.subscribe(subjects[0], stream=stream, ordered_consumer=True, config=config, cb=inbox.put)
        last = after
        while True:
            msg = await inbox.get()
            msg_id = (msg.headers or {}).get("Nats-Msg-Id", "")
            if not msg_id.isdigit() or int(msg_id) <= last:
                continue
            last = int(msg_id)
            yield _decoder.decode(msg.data)
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


async def start_sequence(js: JetStreamContext, stream: str, after: int) -> int:
    """The stream sequence of the first message with position > ``after`` (0: from the start).

    Positions grow with stream sequences (the relay publishes in order), so a binary search
    over sequences finds it in O(log n) lookups; past the end it is ``last_seq + 1``.
    """
    while True:
        try:
            state = (await js.stream_info(stream)).state
            break
        except nats.js.errors.NotFoundError:
            await asyncio.sleep(STREAM_WAIT)
    if after <= 0 or state.messages == 0:
        return 0 if state.messages == 0 and state.last_seq == 0 else state.first_seq
    lo, hi = state.first_seq, state.last_seq + 1
    while lo < hi:
        mid = (lo + hi) // 2
        position = await _position_at_or_after(js, stream, mid)
        if position is None or position > after:
            hi = mid
        else:
            lo = mid + 1
    return lo


async def _position_at_or_after(js: JetStreamContext, stream: str, seq: int) -> int | None:
    """The position of the first message at sequence >= ``seq`` (None: none left, or no id)."""
    try:
        msg = await js.get_msg(stream, seq=seq, subject="eventcoord.>", next=True)
    except nats.js.errors.NotFoundError:
        return None
    msg_id = (msg.headers or {}).get("Nats-Msg-Id", "")
    return int(msg_id) if msg_id.isdigit() else None
