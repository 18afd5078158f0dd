"""The embedded broker: a real nats-server process, started, restarted and stopped."""

from __future__ import annotations

import os
from pathlib import Path

import nats
import pytest

from eventcoord.outbox.broker import BrokerError, EmbeddedBroker, find_nats_server, throwaway_broker


def test_finds_the_binary_shipped_with_the_environment() -> None:
    path = find_nats_server()
    assert os.path.basename(path).startswith("nats-server") and os.access(path, os.X_OK)


async def test_starts_with_jetstream_on_a_random_port_and_stops(tmp_path: Path) -> None:
    broker = EmbeddedBroker(str(tmp_path))
    url = await broker.start()
    try:
        assert url.startswith("nats://127.0.0.1:") and broker.port and broker.port > 0
        nc = await nats.connect(url)
        info = await nc.jetstream().account_info()  # fails unless JetStream is on
        assert info.limits is not None
        await nc.close()
        assert (tmp_path / "nats").is_dir()
    finally:
        await broker.stop()
    assert not broker.running


async def test_restart_keeps_its_port_and_its_data(tmp_path: Path) -> None:
    broker = EmbeddedBroker(str(tmp_path))
    url = await broker.start()
    nc = await nats.connect(url)
    await nc.jetstream().add_stream(name="KEEP", subjects=["keep.>"])
    await nc.jetstream().publish("keep.a", b"x")
    await nc.close()
    await broker.kill()  # a crash, not a clean stop
    assert await broker.start() == url
    try:
        nc = await nats.connect(url)
        assert (await nc.jetstream().stream_info("KEEP")).state.messages == 1
        await nc.close()
    finally:
        await broker.stop()


async def test_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    async with throwaway_broker() as first:
        second = EmbeddedBroker(str(tmp_path), port=first.port)
        with pytest.raises(BrokerError):
            await second.start()
        assert not second.running
