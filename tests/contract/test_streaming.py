"""Following the log (SSE) and subscribing to the stream (NATS), on real stores and brokers."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from eventcoord.client.subscriber import subscribe
from eventcoord.codec import WireEvent
from eventcoord.events import AgentHeartbeat, MessagePosted
from eventcoord.outbox.broker import throwaway_broker
from eventcoord.outbox.follow import follow, pulse, sse_frame
from eventcoord.outbox.relay import Relay


async def test_follow_catches_up_then_goes_live_in_one_workspace(store: Any) -> None:
    for i in range(6):
        await store.append("ws1" if i % 2 == 0 else "ws2", f"s:{i}", None, [AgentHeartbeat(session_id=str(i))])
    signal = asyncio.Event()
    seen: list[int] = []

    async def consume() -> None:
        async for ev in follow(store, after=1, workspace="ws1", poll=signal, poll_interval=30):
            seen.append(ev.position)
            if len(seen) == 3:
                return

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    assert seen == [3, 5]  # catch-up: after is exclusive, other workspaces are invisible
    await store.append("ws2", "s:x", None, [AgentHeartbeat(session_id="x")])
    await store.append("ws1", "s:y", None, [AgentHeartbeat(session_id="y")])
    pulse(signal)  # the commit signal, not the 30 s poll, wakes the follower
    await asyncio.wait_for(task, 5)
    assert seen == [3, 5, 8] and not signal.is_set()


async def test_sse_frame_carries_position_type_and_wire_json(store: Any) -> None:
    await store.append("ws", "s:1", None, [MessagePosted(channel="issue:a", body="two\nlines")])
    ev = (await store.read())[0]
    frame = sse_frame(ev)
    lines = frame.decode().split("\n")
    assert lines[:2] == ["id: 1", "event: MessagePosted"] and frame.endswith(b"\n\n")
    assert lines[2].startswith("data: ") and lines[3:] == ["", ""]
    assert msgspec.json.decode(lines[2][6:].encode(), type=WireEvent) == ev


async def test_subscribe_starts_after_a_position_filters_types_and_goes_live(store: Any) -> None:
    async with throwaway_broker() as broker:
        relay = Relay(store, broker.url, instance_id="r", lease_seconds=2)
        await relay.start()
        try:
            for i in range(40):
                event = MessagePosted(channel="c", body=str(i)) if i % 4 == 0 else AgentHeartbeat(session_id=str(i))
                await store.append("ws" if i % 2 == 0 else "other", f"s:{i}", None, [event])
            relay.notify()

            async def collect(types: list[str], until: int) -> list[int]:
                got: list[int] = []
                async for ev in subscribe(broker.url, workspace="ws", types=types, after=20):
                    assert bytes(ev.metadata) == b'{"workspace":"ws"}'
                    got.append(ev.position)
                    if ev.position >= until:
                        return got
                raise AssertionError("the subscription ended")

            both = asyncio.create_task(collect(["MessagePosted", "AgentHeartbeat"], 43))
            messages = asyncio.create_task(collect(["MessagePosted"], 41))
            await asyncio.sleep(0.5)  # caught up; what follows arrives live
            await store.append("ws", "s:live", None, [MessagePosted(channel="c", body="live")])
            await store.append("other", "s:live", None, [MessagePosted(channel="c", body="no")])
            await store.append("ws", "s:live2", None, [AgentHeartbeat(session_id="live")])
            relay.notify()
            assert await asyncio.wait_for(both, 10) == [*range(21, 40, 2), 41, 43]
            assert await asyncio.wait_for(messages, 10) == [21, 25, 29, 33, 37, 41]
        finally:
            await relay.stop()
