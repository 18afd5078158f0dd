"""PostgreSQL unreachable: every route answers 503 STORE_UNAVAILABLE with Retry-After and
/health 503 naming the cause; once it is back, the same server answers again, no restart.
A real TCP proxy between the server and the real PostgreSQL is cut,
then restored."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from tests.helpers import Api, ServerProcess, TcpProxy, wait_until

pytestmark = pytest.mark.postgres

READS = [
    "/v1/agents",
    "/v1/agents/s-1",
    "/v1/leases",
    "/v1/file-claims",
    "/v1/conflicts",
    "/v1/heatmap",
    "/v1/queue",
    "/v1/messages?channel=issue:I-1",
    "/v1/events",
    "/v1/named-leases",
    "/v1/issues/I-1/state",
]


def assert_unavailable(r: httpx.Response, what: str) -> None:
    assert r.status_code == 503, (what, r.status_code, r.text)
    assert r.headers.get("retry-after", "").isdigit(), (what, r.headers)
    assert r.json()["error"]["code"] == "STORE_UNAVAILABLE", (what, r.text)


async def test_an_unreachable_database_is_503_then_recovers_without_restart(db_url: str, tmp_path: Path) -> None:
    target = urlsplit(db_url)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 5432)
    server = ServerProcess(proxy.url(db_url), tmp_path / "data")
    api = Api(server.base_url)
    try:
        agent = await api.client("agent")  # a token the server looks up in the database
        sid = await agent.register(actor="a")
        await agent.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "I-1"})

        proxy.cut()
        health = httpx.get(server.base_url + "/health", timeout=30)
        assert health.status_code == 503 and health.headers.get("retry-after", "").isdigit(), health.text
        assert health.json()["status"] == "unavailable" and "postgresql" in health.json()["cause"], health.text
        for path in READS:
            assert_unavailable(await api.http.get(path), path)
            assert_unavailable(await agent.http.get(path), path)
        commands: list[dict[str, Any]] = [
            {"type": "heartbeat_agent", "session_id": sid, "command_id": "hb-outage"},
            {"type": "release_issue", "session_id": sid, "issue": "I-1"},
            {"type": "register_agent", "actor": "b"},
        ]
        for body in commands:
            assert_unavailable(await api.command(body), body["type"])
            assert_unavailable(await agent.command(body), body["type"])
        stranger = Api(server.base_url, token=f"unknown-{uuid.uuid4().hex}")
        try:
            assert_unavailable(await stranger.http.get("/v1/leases"), "an uncached token")
        finally:
            await stranger.close()

        proxy.restore()
        await wait_until(
            lambda: httpx.get(server.base_url + "/health", timeout=30).status_code == 200, 60, "health 200 again"
        )
        # the same process serves reads and commands again; a retried command_id appends once
        await agent.ok({"type": "heartbeat_agent", "session_id": sid, "command_id": "hb-outage"})
        await agent.ok({"type": "heartbeat_agent", "session_id": sid, "command_id": "hb-outage"})
        await agent.ok({"type": "release_issue", "session_id": sid, "issue": "I-1"})
        assert (await api.get("/v1/leases"))["leases"] == []
        for path in READS:
            r = await agent.http.get(path)
            assert r.status_code in (200, 404), (path, r.text)
        beats = [e for e in await api.events("AgentHeartbeat") if e["metadata"].get("command_id") == "hb-outage"]
        assert len(beats) == 1
        await agent.close()
    finally:
        await api.close()
        server.stop()
        proxy.close()
