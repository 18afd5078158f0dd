"""Metrics and the Server-Sent Events stream of a real server."""

from __future__ import annotations

import asyncio
import json

import httpx
from tests.helpers import BOOTSTRAP, Api, ServerProcess


async def test_metrics_count_commands_by_type_and_outcome(api: Api, server: ServerProcess) -> None:
    sid = await api.register(actor="alice")
    await api.error({"type": "heartbeat_agent", "session_id": "s-nope"}, 404, "NOT_FOUND")
    await api.ok({"type": "heartbeat_agent", "session_id": sid})
    text = httpx.get(server.base_url + "/metrics").text  # no token needed, like /health
    assert 'eventcoord_commands_total{outcome="ok",type="register_agent"} 1.0' in text
    assert 'eventcoord_commands_total{outcome="NOT_FOUND",type="heartbeat_agent"} 1.0' in text
    assert "eventcoord_command_seconds_bucket" in text
    assert "eventcoord_log_head 2.0" in text


async def test_sse_stream_catches_up_then_goes_live(api: Api, server: ServerProcess) -> None:
    first = await api.register(actor="alice")
    received: list[dict[str, object]] = []

    async def listen() -> None:
        headers = {"authorization": f"Bearer {BOOTSTRAP}"}
        async with httpx.AsyncClient(base_url=server.base_url, timeout=None) as http:
            async with http.stream("GET", "/v1/events/stream", params={"after": 0}, headers=headers) as r:
                assert r.status_code == 200
                assert r.headers["content-type"].startswith("text/event-stream")
                event_id = None
                async for line in r.aiter_lines():
                    if line.startswith("id: "):
                        event_id = int(line[4:])
                    if line.startswith("data: "):
                        ev = json.loads(line[6:])
                        assert ev["position"] == event_id
                        received.append(ev)
                        if len(received) == 3:
                            return

    listener = asyncio.create_task(listen())
    await asyncio.sleep(0.3)
    await api.ok({"type": "heartbeat_agent", "session_id": first})
    await api.register(actor="bob")
    await asyncio.wait_for(listener, 10)
    assert [e["position"] for e in received] == [1, 2, 3]
    assert [e["type"] for e in received] == ["AgentRegistered", "AgentHeartbeat", "AgentRegistered"]


async def test_sse_stream_is_scoped_to_the_token_workspace(api: Api, server: ServerProcess) -> None:
    other = (await api.ok({"type": "issue_token", "role": "reader", "workspace": "elsewhere"}))["token"]
    await api.register(actor="alice")
    headers = {"authorization": f"Bearer {other}"}
    async with httpx.AsyncClient(base_url=server.base_url, timeout=2.0) as http:
        async with http.stream("GET", "/v1/events/stream", params={"after": 0}, headers=headers) as r:
            lines: list[str] = []
            try:
                async for line in r.aiter_lines():
                    lines.append(line)
            except httpx.ReadTimeout:
                pass
    assert not any(line.startswith("data: ") for line in lines)


async def test_the_bearer_scheme_is_case_insensitive(server: ServerProcess) -> None:
    for scheme in ("bearer", "BEARER", "Bearer"):
        r = httpx.get(server.base_url + "/v1/agents", headers={"authorization": f"{scheme} {BOOTSTRAP}"})
        assert r.status_code == 200, r.text
    r = httpx.get(server.base_url + "/v1/agents", headers={"authorization": f"Basic {BOOTSTRAP}"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHENTICATED"


async def test_the_startup_heap_is_frozen_out_of_the_collectors_full_passes(server: ServerProcess) -> None:
    # A full collection walked every module, the app and the runtime again: 80-105 ms with
    # the loop stopped, the p99 of every command. `eventcoord serve` freezes them at startup.
    text = httpx.get(server.base_url + "/metrics").text
    frozen = next(line for line in text.splitlines() if line.startswith("eventcoord_gc_frozen_objects "))
    assert float(frozen.split()[1]) > 50_000, frozen
