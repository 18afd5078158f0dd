"""The outbox relay: publishes the event log to NATS JetStream in position order.

The events table itself is the outbox, and positions are contiguous and commit-ordered, so
the relay's whole state is one checkpoint (``relay_state.position``); a command never waits
on NATS, it only calls :meth:`Relay.notify` after its commit. One publisher at a time (a
leader lease with a fencing token), order and no gaps (``Nats-Expected-Last-Sequence``), at
least once without duplicates (``Nats-Msg-Id`` = position), never into a stream bound to
another store: how each is given, docs/architecture.md#the-outbox-relay-and-the-log-tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import uuid
from typing import Any, Literal

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext, api
from sqlalchemy import Connection, select

from eventcoord.codec import WireEvent, encode
from eventcoord.errors import StoreUnavailable
from eventcoord.outbox.jetstream import (
    DEFAULT_DUPLICATE_WINDOW,
    DEFAULT_MAX_AGE,
    DEFAULT_MAX_BYTES,
    WRONG_LAST_SEQUENCE,
    StreamRefused,
    ensure_stream,
    last_position,
    stream_config,
    subject_of,
)
from eventcoord.outbox.leadership import RelayLease
from eventcoord.store.base import EventStore
from eventcoord.store.schema import settings

log = logging.getLogger("eventcoord.outbox.relay")

RelayState = Literal["publishing", "standby", "disconnected", "refused_foreign_stream", "off"]

#: How often status()'s head is refreshed from the store, in seconds.
HEAD_REFRESH = 0.5


class _LostTail(Exception):
    """The stream's tail moved under us (wrong last sequence, duplicate, lost ack)."""


class Relay:
    """Publishes every committed event to JetStream; one leader among replicas.

    Construct it in the app lifespan, ``await start()``, call :meth:`notify` after every
    commit, ``await stop()`` before closing the store; :meth:`status` feeds ``/health``.
    ``instance_id`` must be unique per running relay (the default is host:pid:random).
    """

    def __init__(
        self,
        store: EventStore,
        nats_url: str,
        stream_name: str = "EVENTCOORD",
        *,
        instance_id: str | None = None,
        lease_seconds: float = 10.0,
        poll_interval: float = 0.2,
        # Publishes in flight at once. Awaiting each PubAck before the next caps a relay at
        # ~900 events/s here; 256 in flight published ~21,000/s (bench/relay_latency.py).
        window: int = 256,
        ack_timeout: float = 5.0,
        max_age: float = DEFAULT_MAX_AGE,
        max_bytes: int = DEFAULT_MAX_BYTES,
        duplicate_window: float = DEFAULT_DUPLICATE_WINDOW,
    ) -> None:
        self.store = store
        self.nats_url = nats_url
        self.stream_name = stream_name
        self.instance_id = instance_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_seconds = lease_seconds
        self._lease = RelayLease(stream_name, self.instance_id, lease_seconds)
        self.poll_interval = poll_interval
        self.window = max(1, window)
        self.ack_timeout = ack_timeout
        self.stream_config = stream_config(stream_name, max_age, max_bytes, duplicate_window)
        #: Events this relay got a PubAck for (tests and metrics).
        self.published = 0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._nc: NATS | None = None
        self._store_id: str | None = None
        self._checkpoint = 0  # highest position known to be in the stream
        self._head = 0
        self._head_task: asyncio.Task[None] | None = None
        self._refused: str | None = None
        self._warned_ahead = False
        self._inflight: list[asyncio.Future[api.PubAck]] = []

    # --- public API ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start the background task; returns at once (NATS may still be unreachable)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"eventcoord-relay-{self.stream_name}")
            self._head_task = asyncio.create_task(self._watch_head(), name="eventcoord-relay-head")

    async def stop(self) -> None:
        """Stop publishing, save the checkpoint and hand the lease back so a standby takes over."""
        for task in (self._task, self._head_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._head_task = None
        await self._lease.release(self.store, self._checkpoint)
        await self._disconnect()

    def notify(self) -> None:
        """Wake the relay: events were just committed. Cheap; call from the event loop."""
        self._wake.set()

    @property
    def leader(self) -> bool:
        """Whether this relay holds a lease it may publish under."""
        return self._lease.held

    @property
    def broker_connected(self) -> bool:
        """Whether the NATS connection is up."""
        return self._nc is not None and self._nc.is_connected

    def status(self) -> dict[str, Any]:
        """The relay's health for ``/health``, as of its last loop iteration."""
        state: RelayState
        if self._task is None or self._task.done():
            state = "off"
        elif not self.broker_connected:
            state = "disconnected"
        elif not self.leader:
            state = "standby"
        elif self._refused is not None:
            state = "refused_foreign_stream"
        else:
            state = "publishing"
        head = max(self._head, self._checkpoint)
        return {
            "state": state,
            "checkpoint": self._checkpoint,
            "head": head,
            "lag": head - self._checkpoint,
            "leader": self.leader,
            "broker": "connected" if self.broker_connected else "disconnected",
            "stream": self.stream_name,
            "detail": self._refused,
        }

    # --- the loop -----------------------------------------------------------------------

    async def _run(self) -> None:
        delay = _Backoff()
        while True:
            try:
                if self._store_id is None:
                    self._store_id = await self.store.query(_store_id)
                await self._connect()
                await self._serve(delay)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # loop boundary: log, back off, retry from the checkpoint
                if not isinstance(e, StoreUnavailable):  # an outage is logged once, by the store
                    log.warning("relay %s: %s: %s; retrying", self.instance_id, type(e).__name__, e)
            await self._disconnect()
            await asyncio.sleep(delay.next())

    async def _watch_head(self) -> None:
        """Keep the head behind status()'s lag current, whatever the publishing loop is doing."""
        while True:
            with contextlib.suppress(Exception):  # the store being down shows up elsewhere
                self._head = max(self._head, await self.store.head())
            await asyncio.sleep(HEAD_REFRESH)

    async def _serve(self, delay: _Backoff) -> None:
        """While connected: lead or stand by; when leading, publish."""
        js = self._js()
        while self.broker_connected:
            if not await self._hold_lease():
                await asyncio.sleep(self._lease.standby_interval)
                continue
            try:
                position, seq = await self._resync(js)
            except StreamRefused as e:
                if self._refused != str(e):
                    log.error("relay: refusing to publish into stream %s: %s", self.stream_name, e)
                self._refused = str(e)
                # Not _idle: a commit must not trigger a stream lookup; an operator fixes this.
                await asyncio.sleep(min(self.lease_seconds / 3, 5.0))
                continue
            self._refused = None
            delay.reset()
            try:
                await self._publish_loop(js, position, seq)
            except _LostTail as e:
                log.info("relay: %s; re-reading the stream tail", e)

    async def _publish_loop(self, js: JetStreamContext, position: int, seq: int) -> None:
        """Publish everything after ``position``; ``seq`` is the stream's last sequence."""
        token = self._lease.token
        while self.broker_connected:
            # A new token means the lease lapsed and was re-taken: re-read the stream tail.
            if not await self._hold_lease() or self._lease.token != token:
                return
            self._wake.clear()  # before reading, so a commit during the read is not missed
            batch = await self.store.read(after=position, limit=self.window)
            batch = _contiguous(batch, position)
            if batch:
                self._head = max(self._head, batch[-1].position)
            if not batch:
                if self._checkpoint > self._lease.persisted:
                    await self._hold_lease(flush=True)
                await self._idle(self.poll_interval)
                continue
            position, seq = await self._publish(js, batch, seq)

    async def _publish(self, js: JetStreamContext, batch: list[WireEvent], seq: int) -> tuple[int, int]:
        """Publish a window without waiting between messages, then take the acks in order.

        One connection delivers them to the broker in order, and each expects the previous
        one's sequence, so the stream keeps position order even with many in flight.
        """
        futures = self._inflight = []
        position = batch[0].position - 1
        try:
            for i, ev in enumerate(batch):
                headers = {"Nats-Msg-Id": str(ev.position), "Nats-Expected-Last-Sequence": str(seq + i)}
                futures.append(
                    await js.publish_async(subject_of(ev), encode(ev), headers=headers, stream=self.stream_name)
                )
            current = batch[0].position
            try:
                # One deadline for the window: a timer per ack costs more than the ack itself.
                async with asyncio.timeout(self.ack_timeout):
                    for ev, future in zip(batch, futures, strict=True):
                        current = ev.position
                        ack = await future
                        if ack.duplicate or ack.seq != seq + 1:
                            raise _LostTail(f"position {ev.position} stored as sequence {ack.seq}, expected {seq + 1}")
                        position, seq = ev.position, ack.seq
                        self._checkpoint = max(self._checkpoint, position)
                        self.published += 1
            except nats.js.errors.APIError as e:
                if e.err_code == WRONG_LAST_SEQUENCE:
                    raise _LostTail(f"the stream moved past sequence {seq} (another publisher)") from e
                raise
            except nats.js.errors.NoStreamResponseError as e:
                raise _LostTail(f"stream {self.stream_name} is gone") from e
            except TimeoutError as e:
                raise _LostTail(f"no PubAck for position {current} in {self.ack_timeout}s") from e
        finally:
            self._inflight = []
            for future in futures:
                if not future.done():
                    future.cancel()
        return position, seq

    # --- the stream ---------------------------------------------------------------------

    async def _resync(self, js: JetStreamContext) -> tuple[int, int]:
        """Make sure the stream exists and is ours; return (resume position, last sequence)."""
        info = await ensure_stream(js, self.stream_name, self.stream_config, self._store_id or "")
        last_seq = info.state.last_seq
        in_stream = await last_position(js, self.stream_name, info.state)
        position = max(self._lease.persisted, self._checkpoint, in_stream)
        self._checkpoint = position
        if position > self._head and not self._warned_ahead:
            self._head = await self.store.head()
            if position > self._head:
                # Same store id, yet the stream is ahead: the database was restored from a
                # backup. Events re-using those positions would be dropped as duplicates.
                log.error(
                    "relay: stream %s is at position %d, the store only at %d", self.stream_name, position, self._head
                )
                self._warned_ahead = True
        return position, last_seq

    # --- the lease and the checkpoint ---------------------------------------------------

    async def _hold_lease(self, flush: bool = False) -> bool:
        """Acquire, renew and flush as due; True while this relay may publish."""
        leading, leaders_checkpoint = await self._lease.hold(self.store, self._checkpoint, flush)
        if leaders_checkpoint is not None:
            self._checkpoint = leaders_checkpoint  # a standby reports the leader's progress
        return leading

    # --- plumbing -----------------------------------------------------------------------

    async def _idle(self, timeout: float) -> None:
        """Sleep until notified, the broker drops, or ``timeout``."""
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel() that races
        # the wake-up, and stop() would then wait forever for a task that keeps running.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wake.wait()

    async def _connect(self) -> None:
        async def disconnected() -> None:
            if self._nc is not None:  # not our own close()
                log.warning("relay: disconnected from NATS at %s", self.nats_url)
            # Acks for messages in flight will never come: fail them now, not at the timeout.
            for future in self._inflight:
                if not future.done():
                    future.set_exception(nats.errors.ConnectionClosedError())
            self._wake.set()

        async def error(e: Exception) -> None:
            log.debug("relay: NATS client error: %s", e)

        # No client-side reconnect: after a drop we open a fresh connection and re-read the
        # stream tail, so nothing buffered during the outage is sent behind our back.
        self._nc = await nats.connect(
            self.nats_url,
            name=f"eventcoord-relay-{self.instance_id}",
            allow_reconnect=False,
            connect_timeout=2,
            ping_interval=5,
            max_outstanding_pings=2,
            disconnected_cb=disconnected,
            error_cb=error,
        )
        log.info("relay: connected to NATS at %s", self.nats_url)

    def _js(self) -> JetStreamContext:
        assert self._nc is not None
        return self._nc.jetstream(timeout=self.ack_timeout)

    async def _disconnect(self) -> None:
        nc, self._nc = self._nc, None
        if nc is not None and not nc.is_closed:
            with contextlib.suppress(Exception):
                await nc.close()


def _store_id(conn: Connection) -> str:
    return str(conn.execute(select(settings.c.value).where(settings.c.key == "store_id")).scalar_one())


def _contiguous(batch: list[WireEvent], after: int) -> list[WireEvent]:
    """The leading run of ``batch`` that continues ``after`` without a gap.

    Positions are contiguous and commit-ordered, so a gap is never expected; if one
    appeared, publishing past it would lose an event forever, so stop at it.
    """
    for i, ev in enumerate(batch):
        if ev.position != after + i + 1:
            log.warning("relay: gap in the log after position %d; waiting", after + i)
            return batch[:i]
    return batch


class _Backoff:
    """Exponential backoff with jitter, 50 ms to 2 s: quick to recover, gentle when down."""

    def __init__(self) -> None:
        self._delay = 0.05

    def next(self) -> float:
        delay = self._delay
        self._delay = min(self._delay * 2, 2.0)
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self._delay = 0.05
