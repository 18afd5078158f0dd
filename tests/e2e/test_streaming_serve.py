"""`eventcoord serve` streaming every event: the embedded broker, an existing broker, tail."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from tests.helpers import BOOTSTRAP, Api, ServerProcess

from eventcoord.client.subscriber import subscribe
from eventcoord.outbox.broker import throwaway_broker


def wait_health(
    server: ServerProcess, predicate: Callable[[dict[str, object]], bool], timeout: float = 15.0
) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        relay = httpx.get(server.base_url + "/health").json()["relay"]
        if predicate(relay) or time.monotonic() > deadline:
            return relay  # type: ignore[no-any-return]
        time.sleep(0.1)


async def receive(nats_url: str, count: int) -> list[object]:
    out: list[object] = []

    async def run() -> None:
        async for ev in subscribe(nats_url, workspace="default"):
            out.append(ev)
            if len(out) == count:
                return

    await asyncio.wait_for(run(), 20)
    return out


async def test_serve_with_the_embedded_broker_publishes_every_event_in_order(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server(nats="embedded")
    api = Api(server.base_url)
    try:
        sid = await api.register(actor="alice")
        for _ in range(5):
            await api.ok({"type": "heartbeat_agent", "session_id": sid})
        await api.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "P-1"})
        relay = wait_health(server, lambda r: r.get("lag") == 0 and r.get("checkpoint") == 7)
        assert relay["state"] == "publishing" and relay["broker"] == "connected" and relay["lag"] == 0
        events = await receive(str(relay["nats_url"]), 7)
        assert [e.position for e in events] == list(range(1, 8))  # type: ignore[attr-defined]
        assert [e.type for e in events][-1] == "LeaseGranted"  # type: ignore[attr-defined]
        # The broker's files live under the service's data folder.
        assert (Path(server.log_path).parent / "nats").is_dir()
    finally:
        await api.close()


async def test_serve_with_an_existing_broker_and_tail(
    start_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    async with throwaway_broker(str(tmp_path / "broker")) as broker:
        server = start_server(nats=broker.url)
        api = Api(server.base_url)
        try:
            sid = await api.register(actor="bob")
            await api.ok({"type": "heartbeat_agent", "session_id": sid})
            relay = wait_health(server, lambda r: r.get("lag") == 0 and r.get("checkpoint") == 2)
            assert relay["nats_url"] == broker.url and relay["state"] == "publishing"
            assert [e.type for e in await receive(broker.url, 2)] == ["AgentRegistered", "AgentHeartbeat"]  # type: ignore[attr-defined]
            # eventcoord tail, over Server-Sent Events, filtered by type.
            tail = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "eventcoord.cli",
                    "tail",
                    "--url",
                    server.base_url,
                    "--token",
                    BOOTSTRAP,
                    "--type",
                    "AgentHeartbeat",
                ],
                stdout=subprocess.PIPE,
                env={**os.environ},
            )
            try:
                assert tail.stdout is not None
                line = await asyncio.wait_for(asyncio.to_thread(tail.stdout.readline), 20)
                first = json.loads(line)
                assert (first["type"], first["position"]) == ("AgentHeartbeat", 2)
                await api.ok({"type": "heartbeat_agent", "session_id": sid})
                line = await asyncio.wait_for(asyncio.to_thread(tail.stdout.readline), 20)
                assert json.loads(line)["position"] == 3
            finally:
                tail.terminate()
                tail.wait(10)
        finally:
            await api.close()
