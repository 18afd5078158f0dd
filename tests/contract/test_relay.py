"""The outbox relay against real nats-server processes and real stores.

Every test reads the stream back through the broker and checks the one invariant that
matters: message i of the stream carries position i (``Nats-Msg-Id``), so every event is
there exactly once, in position order, with no gap.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import nats
import pytest
from nats.js import api
from sqlalchemy import select, update
from tests.helpers import wait_until

from eventcoord.codec import WireEvent
from eventcoord.events import AgentHeartbeat, MessagePosted
from eventcoord.outbox.broker import EmbeddedBroker, throwaway_broker
from eventcoord.outbox.jetstream import STORE_ID_KEY
from eventcoord.outbox.relay import Relay
from eventcoord.store.schema import relay_state, settings


@pytest.fixture
async def broker() -> AsyncIterator[EmbeddedBroker]:
    async with throwaway_broker() as b:
        yield b


async def append(store: Any, relays: list[Relay], n: int, workspace: str = "ws", tag: str = "s") -> None:
    """``n`` single-event commands, 8 at a time, each followed by notify()."""

    async def one(i: int) -> None:
        event = AgentHeartbeat(session_id=f"{tag}{i}") if i % 3 else MessagePosted(channel="issue:x", body=f"m{i}")
        await store.append(workspace, f"{tag}:{i}", None, [event])
        for relay in relays:
            relay.notify()

    for start in range(0, n, 8):
        await asyncio.gather(*(one(i) for i in range(start, min(start + 8, n))))


async def stream_messages(url: str, stream: str = "EVENTCOORD") -> list[tuple[int, str, bytes]]:
    """Every message of the stream as (msg id, subject, payload), in stream order."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(stream)
        out: list[tuple[int, str, bytes]] = []
        if info.state.messages == 0:
            return out
        sub = await js.subscribe("eventcoord.>", stream=stream, ordered_consumer=True)
        while len(out) < info.state.messages:
            msg = await sub.next_msg(timeout=5)
            out.append((int((msg.headers or {})["Nats-Msg-Id"]), msg.subject, msg.data))
        return out
    finally:
        await nc.close()


async def assert_stream_is_the_log(url: str, store: Any, first: int = 1) -> None:
    head = await store.head()
    messages = await stream_messages(url)
    assert [m[0] for m in messages] == list(range(first, head + 1))
    wire = {e.position: e for e in await store.read(after=0, limit=10_000)}
    for position, subject, payload in messages:
        ev = msgspec.json.decode(payload, type=WireEvent)
        assert ev == wire[position]
        assert subject == f"eventcoord.ws.{ev.type}"


def relay_for(store: Any, url: str, name: str, **kw: Any) -> Relay:
    kw.setdefault("lease_seconds", 2.0)
    kw.setdefault("ack_timeout", 2.0)
    return Relay(store, url, instance_id=name, **kw)


async def caught_up(relay: Relay, store: Any, timeout: float = 15.0) -> None:
    head = await store.head()
    await wait_until(lambda: relay.status()["checkpoint"] >= head, timeout, f"checkpoint {head}")


async def test_publishes_every_event_once_in_position_order(store: Any, broker: EmbeddedBroker) -> None:
    relay = relay_for(store, broker.url, "r1")
    await relay.start()
    try:
        await append(store, [relay], 240)
        await caught_up(relay, store)
        status = relay.status()
        assert status | {"detail": None} == {
            "state": "publishing", "checkpoint": 240, "head": 240, "lag": 0, "leader": True,
            "broker": "connected", "stream": "EVENTCOORD", "detail": None,
        }  # fmt: skip
        assert relay.published == 240
    finally:
        await relay.stop()
    assert relay.status()["state"] == "off"
    await assert_stream_is_the_log(broker.url, store)

    nc = await nats.connect(broker.url)
    config = (await nc.jetstream().stream_info("EVENTCOORD")).config
    await nc.close()
    store_id = await store.query(
        lambda c: c.execute(select(settings.c.value).where(settings.c.key == "store_id")).scalar_one()
    )
    assert config.subjects == ["eventcoord.>"] and config.storage == api.StorageType.FILE
    assert config.retention == api.RetentionPolicy.LIMITS and config.max_age and config.max_bytes
    assert config.duplicate_window is not None and config.duplicate_window >= 120
    assert (config.metadata or {})[STORE_ID_KEY] == store_id
    # stop() saved the checkpoint and handed the lease back.
    row = await store.query(lambda c: c.execute(select(relay_state)).one())
    assert (row.position, row.holder) == (240, None)


async def test_broker_loss_loses_nothing_and_never_blocks_commands(store: Any) -> None:
    data = tempfile.mkdtemp(prefix="eventcoord-nats-")
    broker = EmbeddedBroker(data)
    url = await broker.start()
    relay = relay_for(store, url, "r1")
    await relay.start()
    slowest = 0.0
    try:
        stop_writing = asyncio.Event()

        async def writer() -> None:
            nonlocal slowest
            i = 0
            while not stop_writing.is_set():
                t0 = time.monotonic()
                await store.append("ws", f"w:{i}", None, [AgentHeartbeat(session_id=f"w{i}")])
                relay.notify()
                slowest = max(slowest, time.monotonic() - t0)
                i += 1
                await asyncio.sleep(0.003)

        task = asyncio.create_task(writer())
        await wait_until(lambda: relay.status()["checkpoint"] >= 100, what="100 published")
        await broker.kill()  # mid-stream, abruptly
        await wait_until(lambda: relay.status()["state"] == "disconnected", what="disconnected")
        outage_start = await store.head()
        await asyncio.sleep(1.0)
        assert await store.head() > outage_start + 50, "commands kept committing while NATS was down"
        await wait_until(lambda: relay.status()["lag"] > 50, 5, "lag during the outage")
        await broker.start()  # same data dir, same port
        await asyncio.sleep(0.5)
        stop_writing.set()
        await task
        await caught_up(relay, store)
        assert relay.status()["state"] == "publishing"
        await assert_stream_is_the_log(url, store)
        assert slowest < 0.5, f"a command waited {slowest:.3f}s: commands must never wait on NATS"
    finally:
        await relay.stop()
        await broker.stop()
        shutil.rmtree(data, ignore_errors=True)


async def test_restart_resumes_without_gaps_or_duplicates(store: Any, broker: EmbeddedBroker) -> None:
    first = relay_for(store, broker.url, "r1")
    await first.start()
    await append(store, [first], 50)
    await caught_up(first, store)
    await first.stop()

    # A crash right after publishing, before the checkpoint was flushed: the row is behind
    # the stream. The next relay must resume from the stream's last msg id, not re-publish.
    await store.transact(lambda c: c.execute(update(relay_state).values(position=10)))
    await append(store, [], 30, tag="t")
    second = relay_for(store, broker.url, "r2")
    await second.start()
    try:
        await caught_up(second, store)
        assert second.published == 30
    finally:
        await second.stop()
    await assert_stream_is_the_log(broker.url, store)


async def test_checkpoint_ahead_of_a_recreated_stream_is_kept(store: Any, broker: EmbeddedBroker) -> None:
    relay = relay_for(store, broker.url, "r1")
    await relay.start()
    await append(store, [relay], 20)
    await caught_up(relay, store)
    await relay.stop()
    nc = await nats.connect(broker.url)
    await nc.jetstream().delete_stream("EVENTCOORD")
    await nc.close()

    relay = relay_for(store, broker.url, "r2")
    await relay.start()
    try:
        await append(store, [relay], 5, tag="t")
        await caught_up(relay, store)
        assert relay.published == 5
    finally:
        await relay.stop()
    await assert_stream_is_the_log(broker.url, store, first=21)


async def test_a_deposed_relay_never_moves_the_checkpoint(store: Any, broker: EmbeddedBroker) -> None:
    relay = relay_for(store, broker.url, "r1", lease_seconds=1.5)
    await relay.start()
    try:
        await append(store, [relay], 20)
        await caught_up(relay, store)
        # Another replica takes over (its grant bumps the fencing token).
        taken_at = await store.transact(
            lambda c: c.execute(
                update(relay_state)
                .values(holder="intruder", fencing_token=relay_state.c.fencing_token + 1, expires_us=2**62)
                .returning(relay_state.c.position)
            ).scalar_one()
        )
        await wait_until(lambda: relay.status()["state"] == "standby", 5, "standby")
        published = relay.published
        await append(store, [relay], 20, tag="t")
        await asyncio.sleep(1.0)
        assert relay.published == published and not relay.status()["leader"]
        row = await store.query(lambda c: c.execute(select(relay_state)).one())
        assert (row.holder, row.position) == ("intruder", taken_at)
    finally:
        await relay.stop()
    row = await store.query(lambda c: c.execute(select(relay_state)).one())
    assert (row.holder, row.position) == ("intruder", taken_at), "stop() must not touch a lease it lost"
    assert [m[0] for m in await stream_messages(broker.url)] == list(range(1, 21))


async def test_a_stream_bound_to_another_store_is_refused(store: Any, broker: EmbeddedBroker) -> None:
    nc = await nats.connect(broker.url)
    js = nc.jetstream()
    await js.add_stream(name="EVENTCOORD", subjects=["eventcoord.>"], metadata={STORE_ID_KEY: "another-store"})
    await js.publish("eventcoord.ws.AgentHeartbeat", b"{}", headers={"Nats-Msg-Id": "1"})
    relay = relay_for(store, broker.url, "r1")
    await relay.start()
    try:
        await append(store, [relay], 10)
        await wait_until(lambda: relay.status()["state"] == "refused_foreign_stream", what="refusal")
        await wait_until(lambda: relay.status()["lag"] == 10, what="lag 10")
        status = relay.status()
        assert "another-store" in status["detail"] and status["checkpoint"] == 0 and status["leader"]
        assert relay.published == 0
        assert (await js.stream_info("EVENTCOORD")).state.messages == 1
    finally:
        await relay.stop()
        await nc.close()


@pytest.mark.postgres
async def test_two_relays_on_one_store_only_one_publishes(store: Any, broker: EmbeddedBroker) -> None:
    a = relay_for(store, broker.url, "a", lease_seconds=1.5)
    b = relay_for(store, broker.url, "b", lease_seconds=1.5)
    both = [a, b]
    overlap = 0

    async def watch() -> None:
        nonlocal overlap
        while True:
            overlap += a.status()["leader"] and b.status()["leader"]
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    await a.start()
    await b.start()
    try:
        await wait_until(lambda: a.leader or b.leader, what="a leader")
        await append(store, both, 150)
        leader, standby = (a, b) if a.leader else (b, a)
        await caught_up(leader, store)
        assert standby.published == 0 and standby.status()["state"] == "standby"
        # The leader goes away mid-stream; the standby takes over where it stopped. (Group
        # commit can append a whole round within the sleep, so the stream goes on after the
        # stop too: the standby always has something to take over.)
        writing = asyncio.create_task(append(store, both, 100, tag="t"))
        await asyncio.sleep(0.1)
        await leader.stop()
        await writing
        await append(store, both, 50, tag="u")
        await caught_up(standby, store, timeout=20)
        assert standby.status()["leader"]
        # A PubAck still in flight when the leader stopped is not counted, hence <=; the
        # stream check below proves each event is there exactly once.
        assert standby.published > 0 and leader.published + standby.published <= 300
        assert overlap == 0, "two relays believed they led at the same time"
    finally:
        watcher.cancel()
        for r in both:
            await r.stop()
    await assert_stream_is_the_log(broker.url, store)


async def test_a_workspace_name_never_shares_another_workspaces_subject(store: Any, broker: EmbeddedBroker) -> None:
    """A stored workspace ``"evil\\n"`` (from before names were matched
    whole) must not publish on workspace ``evil_``'s subject, nor stall the relay."""
    relay = relay_for(store, broker.url, "r1")
    await relay.start()
    try:
        for ws in ("evil_", "evil\n", "evil.x", "evil%0A"):
            await store.append(ws, "session:s", None, [AgentHeartbeat(session_id="s")])
            relay.notify()
        await caught_up(relay, store)
    finally:
        await relay.stop()
    subjects = [m[1] for m in await stream_messages(broker.url)]
    assert subjects == [
        "eventcoord.evil_.AgentHeartbeat",
        "eventcoord.evil%0A.AgentHeartbeat",
        "eventcoord.evil%2Ex.AgentHeartbeat",
        "eventcoord.evil%250A.AgentHeartbeat",
    ]
