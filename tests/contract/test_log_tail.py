"""One tail of the log per process, fanned out to many followers (the SSE streams), on real stores."""

from __future__ import annotations

import asyncio
from typing import Any

from eventcoord.codec import WireEvent
from eventcoord.events import AgentHeartbeat
from eventcoord.outbox.tail import KeepAlive, LogTail


async def _append(store: Any, workspace: str, n: int, tag: str) -> None:
    for i in range(n):
        await store.append(workspace, f"s:{tag}:{i}", None, [AgentHeartbeat(session_id=f"{tag}{i}")])


async def _collect(tail: LogTail, after: int, workspace: str | None, count: int, delay: float = 0.0) -> list[int]:
    got: list[int] = []
    async for item in tail.follow(after, workspace):
        if isinstance(item, KeepAlive):
            continue
        assert isinstance(item, WireEvent)
        got.append(item.position)
        if delay:
            await asyncio.sleep(delay)
        if len(got) == count:
            return got
    raise AssertionError("the follow ended")


async def test_many_followers_see_the_same_events_in_order_with_no_gaps(store: Any) -> None:
    await _append(store, "ws", 5, "old")  # before the tail started: read from the store
    tail = LogTail(store, poll_interval=30, capacity=600)
    await tail.start()
    try:
        followers = [asyncio.create_task(_collect(tail, 0, "ws", 65)) for _ in range(40)]
        others = asyncio.create_task(_collect(tail, 0, "other", 20))
        resumed = asyncio.create_task(_collect(tail, 3, "ws", 62))  # Last-Event-ID = 3
        everything = asyncio.create_task(_collect(tail, 0, None, 85))
        for round_ in range(20):
            await _append(store, "ws", 3, f"r{round_}")
            await _append(store, "other", 1, f"o{round_}")
            tail.notify()  # this process's commit signal; the 30 s poll never fires
        ws_positions = [p for p in range(1, 86) if p <= 5 or (p - 6) % 4 != 3]
        for f in followers:
            assert await asyncio.wait_for(f, 30) == ws_positions
        assert await asyncio.wait_for(resumed, 30) == ws_positions[3:]
        assert await asyncio.wait_for(others, 30) == list(range(9, 86, 4))
        assert await asyncio.wait_for(everything, 30) == list(range(1, 86))
        assert tail.followers == 0
    finally:
        await tail.stop()


async def test_a_slow_follower_falls_behind_the_window_and_catches_up_from_the_store(store: Any) -> None:
    tail = LogTail(store, poll_interval=30, capacity=500)  # the window keeps 500..750 events
    await tail.start()
    try:
        slow = asyncio.create_task(_collect(tail, 0, "ws", 1500, delay=0.001))
        fast = asyncio.create_task(_collect(tail, 0, "ws", 1500))
        for chunk in range(15):
            await _append(store, "ws", 100, f"c{chunk}")
            tail.notify()
        assert await asyncio.wait_for(fast, 60) == list(range(1, 1501))
        assert await asyncio.wait_for(slow, 60) == list(range(1, 1501))  # in order, nothing skipped
    finally:
        await tail.stop()


async def test_a_quiet_follower_gets_keep_alives_and_a_closed_one_blocks_nobody(store: Any) -> None:
    tail = LogTail(store, poll_interval=30, keepalive_interval=0.05)
    await tail.start()
    try:
        quiet = tail.follow(0, "nobody-writes-here")
        assert isinstance(await asyncio.wait_for(anext(quiet), 10), KeepAlive)
        assert isinstance(await asyncio.wait_for(anext(quiet), 10), KeepAlive)
        await quiet.aclose()  # a client that went away
        stuck = tail.follow(0, "ws")  # a client that never reads again after its first event
        await _append(store, "ws", 1, "a")
        tail.notify()
        first = await asyncio.wait_for(anext(stuck), 10)
        assert isinstance(first, WireEvent) and first.position == 1
        other = asyncio.create_task(_collect(tail, 0, "ws", 30))
        await _append(store, "ws", 29, "b")
        tail.notify()
        assert await asyncio.wait_for(other, 20) == list(range(1, 31))
        await stuck.aclose()
        assert tail.followers == 0
    finally:
        await tail.stop()


async def test_the_tail_polls_for_commits_of_other_processes(store: Any) -> None:
    tail = LogTail(store, poll_interval=0.05)
    await tail.start()
    try:
        follower = asyncio.create_task(_collect(tail, 0, "ws", 3))
        await _append(store, "ws", 3, "elsewhere")  # no notify(): as if another replica committed
        assert await asyncio.wait_for(follower, 20) == [1, 2, 3]
    finally:
        await tail.stop()


async def test_with_nobody_following_commits_cost_the_tail_no_read_and_a_late_follower_misses_nothing(
    store: Any,
) -> None:
    tail = LogTail(store, poll_interval=0.05)
    await tail.start()
    try:
        for i in range(5):
            await _append(store, "ws", 3, f"n{i}")
            tail.notify()
            await asyncio.sleep(0.06)  # and a poll passes
        assert tail.reads == 0, "no stream follows: a commit costs no read"
        # Streams that come later get every event (the past from the store), then live.
        head = await store.head()
        from_start = asyncio.create_task(_collect(tail, 0, "ws", 18))
        from_head = asyncio.create_task(_collect(tail, head, "ws", 3))
        await asyncio.sleep(0.1)
        await _append(store, "ws", 3, "later")
        tail.notify()
        assert await asyncio.wait_for(from_start, 20) == list(range(1, 19))
        assert await asyncio.wait_for(from_head, 20) == [16, 17, 18]
        assert tail.reads > 0
    finally:
        await tail.stop()
