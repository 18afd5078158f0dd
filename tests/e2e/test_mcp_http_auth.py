"""``eventcoord mcp --transport http`` lends nothing: every request needs an eventcoord bearer
token, and each MCP session acts as the token it presented (docs/protocol.md#under-attack).

The MCP process is started with the operator's admin token in its environment, so any request
that acted as the process would have the operator's power."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from tests.e2e.test_mcp import McpHttp, call, http_client, refused
from tests.helpers import BOOTSTRAP, Api, ServerProcess


@pytest.fixture
def mcp(server: ServerProcess, tmp_path: Path) -> Iterator[McpHttp]:
    """An HTTP MCP server started with the operator's token, in front of ``server``."""
    m = McpHttp(server.base_url, tmp_path / "mcp-http.log")
    yield m
    m.stop()


def _initialize(token: str | None) -> tuple[dict[str, str], dict[str, Any]]:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if token is not None:
        headers["authorization"] = token
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    return headers, body


async def test_a_request_without_a_token_of_the_server_is_401(mcp: McpHttp) -> None:
    async with httpx.AsyncClient(timeout=30.0) as http:
        for header in (None, "", "Bearer", "Bearer  x", "Basic YWRtaW46YWRtaW4=", "Bearer ec_guessed", BOOTSTRAP):
            headers, body = _initialize(header)
            r = await http.post(mcp.url, headers=headers, json=body)
            assert r.status_code == 401, (header, r.text)
        headers, body = _initialize(f"Bearer {BOOTSTRAP}")
        assert (await http.post(mcp.url, headers=headers, json=body)).status_code == 200
    # The SDK's real client without a token, or with a guessed one, cannot even open a session.
    for token in (None, "ec_guessed"):
        statuses: list[int] = []
        with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 401 in its own error types
            async with http_client(mcp.url, token, statuses) as client:
                await client.list_tools()
        assert statuses and set(statuses) == {401}, statuses


async def test_each_session_acts_as_its_own_token(mcp: McpHttp, api: Api) -> None:
    a_token = await api.token("agent")
    b_token = await api.token("agent")
    other_ws_token = await api.token("agent", workspace="ws2")
    async with (
        http_client(mcp.url, a_token) as a,
        http_client(mcp.url, b_token) as b,
        http_client(mcp.url, other_ws_token) as w,
    ):
        sa = (await call(a, "register_agent", actor="alice"))["session_id"]
        sb = (await call(b, "register_agent", actor="bob"))["session_id"]
        sw = (await call(w, "register_agent", actor="walt"))["session_id"]
        await call(a, "claim_issue", project="P", issue="P-1")

        # B's MCP session is B, not the process's admin: A's session is not B's to end or use.
        denied = await refused(b, "end_agent", "FORBIDDEN", session_id=sa, handoff_note="taken over")
        assert denied["details"]["session_id"] == sa
        await refused(b, "release_issue", "FORBIDDEN", session_id=sa, issue="P-1")
        # An agent token mints nothing, in its workspace or another.
        await refused(b, "issue_token", "FORBIDDEN", role="admin", workspace="evil")
        await refused(a, "issue_token", "FORBIDDEN", role="admin")

        # Each acts in its own workspace: ws2's client sees only ws2's sessions.
        seen_by_w = {x["session_id"] for x in (await call(w, "list_agents"))["agents"]}
        seen_by_a = {x["session_id"] for x in (await call(a, "list_agents"))["agents"]}
        assert seen_by_w == {sw}
        assert {sa, sb} <= seen_by_a and sw not in seen_by_a

    deadline = time.monotonic() + 20  # ended when A's client left, by A's own token
    while time.monotonic() < deadline and (await api.agents())[sa]["live"]:
        await asyncio.sleep(0.1)
    assert (await api.agents())[sa]["live"] is False
    ended = {e["data"]["session_id"]: e for e in await api.events("AgentEnded")}
    assert ended[sa]["data"].get("handoff_note") != "taken over"
    assert [e for e in await api.events("TokenIssued") if e["data"].get("workspace") == "evil"] == []


async def test_an_admin_token_over_mcp_acts_as_that_admin_only(mcp: McpHttp, api: Api, server: ServerProcess) -> None:
    ws2_admin = await api.token("admin", workspace="ws2")
    async with http_client(mcp.url, ws2_admin) as admin2:
        minted = await call(admin2, "issue_token", role="reader")
        assert minted["workspace"] == "ws2"
        # an admin of ws2 cannot mint for another workspace through the MCP server either
        await refused(admin2, "issue_token", "FORBIDDEN", role="admin", workspace="evil")
        await refused(admin2, "issue_token", "FORBIDDEN", role="admin", workspace="default")
    reader = Api(server.base_url, minted["token"])
    try:
        assert (await reader.get("/v1/agents"))["agents"] == []
    finally:
        await reader.close()


async def test_an_mcp_session_is_bound_to_the_token_that_opened_it(mcp: McpHttp, api: Api) -> None:
    a_token = await api.token("agent")
    b_token = await api.token("agent")
    async with httpx.AsyncClient(timeout=30.0) as http:
        headers, body = _initialize(f"Bearer {a_token}")
        opened = await http.post(mcp.url, headers=headers, json=body)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        for token, status in ((b_token, 404), (BOOTSTRAP, 404), (a_token, 200)):
            r = await http.post(
                mcp.url,
                headers={**headers, "authorization": f"Bearer {token}", "mcp-session-id": session},
                json=listing,
            )
            assert r.status_code == status, (token == a_token, r.text)
