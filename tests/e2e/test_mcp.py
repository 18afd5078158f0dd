"""``eventcoord mcp`` through the MCP SDK's real client, over stdio and streamable HTTP, against a
real ``eventcoord serve``: racing sessions, refusals as tool errors, file-claim conflicts,
background heartbeats, and the release of everything when the client disconnects."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from tests.helpers import BOOTSTRAP, Api, ServerProcess, free_port

TRANSPORTS = ["stdio", "http"]


class McpHttp:
    """A real ``eventcoord mcp --transport http`` process."""

    def __init__(self, base_url: str, log: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        env = {**os.environ, "EVENTCOORD_URL": base_url, "EVENTCOORD_TOKEN": BOOTSTRAP, **(env or {})}
        self._log = open(log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eventcoord.cli", "mcp", "--transport", "http", "--port", str(self.port)],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, log.read_text()
            try:
                httpx.get(self.url, timeout=1.0)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(log.read_text())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self._log.close()

    def client(self, token: str | None = BOOTSTRAP) -> AbstractAsyncContextManager[Client]:
        """The SDK's client over streamable HTTP, sending ``token`` as its bearer token."""
        return http_client(self.url, token)


@asynccontextmanager
async def http_client(url: str, token: str | None, statuses: list[int] | None = None) -> AsyncIterator[Client]:
    """The MCP SDK's real client over streamable HTTP with ``Authorization: Bearer <token>``
    (the HTTP status of every answer it gets appended to ``statuses``)."""
    headers = {"authorization": f"Bearer {token}"} if token else {}

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    hooks = {"response": [record]}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0), event_hooks=hooks) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


Connect = Callable[[], AbstractAsyncContextManager[Client]]


def _connector(transport: str, base_url: str, tmp_path: Path) -> tuple[Connect, list[McpHttp]]:
    http: list[McpHttp] = []
    if transport == "http":
        http.append(McpHttp(base_url, tmp_path / "mcp-http.log"))

    @asynccontextmanager
    async def open_client() -> AsyncIterator[Client]:
        if http:
            async with http[0].client() as client:
                yield client
            return
        target = StdioServerParameters(
            command=sys.executable,
            args=["-m", "eventcoord.cli", "mcp"],
            env={"EVENTCOORD_URL": base_url, "EVENTCOORD_TOKEN": BOOTSTRAP},
        )
        async with Client(target) as client:
            yield client

    return open_client, http


@pytest.fixture(params=TRANSPORTS)
def connect(request: pytest.FixtureRequest, server: ServerProcess, tmp_path: Path) -> Iterator[Connect]:
    """Open an MCP client session to eventcoord over the transport under test."""
    open_client, http = _connector(request.param, server.base_url, tmp_path)
    yield open_client
    for h in http:
        h.stop()


@pytest.fixture(params=TRANSPORTS)
def connect_nowhere(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Connect]:
    """An MCP server whose eventcoord is not running: for what it answers by itself."""
    open_client, http = _connector(request.param, f"http://127.0.0.1:{free_port()}", tmp_path)
    yield open_client
    for h in http:
        h.stop()


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """A tool call that must succeed; its structured content."""
    r = await client.call_tool(tool, args)
    assert not r.is_error, r.structured_content
    assert isinstance(r.structured_content, dict)
    return r.structured_content


async def refused(client: Client, tool: str, code: str, **args: Any) -> dict[str, Any]:
    """A tool call that must be a tool error with ``code``; the error object."""
    r = await client.call_tool(tool, args)
    assert r.is_error, r.structured_content
    error = r.structured_content
    assert isinstance(error, dict) and error["code"] == code, error
    assert set(error) == {"code", "message", "details"}
    return error


async def test_tools_are_the_commands_and_the_reads(connect_nowhere: Connect) -> None:
    from eventcoord.commands import COMMAND_TYPES

    async with connect_nowhere() as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    reads = {
        "list_agents",
        "list_leases",
        "get_issue_state",
        "list_file_claims",
        "list_conflicts",
        "get_code_heatmap",
        "list_queue",
        "read_messages",
        "read_events",
        "list_named_leases",
        "list_waits",
    }
    assert set(COMMAND_TYPES) | reads <= set(listed)
    # The waiting tools tell an agent when to wait and when to pick other work.
    waits = listed["list_waits"].description or ""
    assert "wait: true" in waits and "pick other work" in waits and "cancel_wait" in waits
    assert listed["list_waits"].annotations and listed["list_waits"].annotations.read_only_hint is True
    claim_help = listed["claim_issue"].description or ""
    assert "wait: true" in claim_help and "pick other work" in claim_help
    assert (
        "wait: true" in (listed["acquire_lease"].description or "")
        and "capacity" in (listed["acquire_lease"].input_schema["properties"])
    )
    assert "DEADLOCK" in (listed["claim_files"].description or "")
    assert {"lock_delay_seconds", "agent_wip_limit"} <= set(listed["configure_project"].input_schema["properties"])
    claim = listed["claim_issue"]
    assert set(claim.input_schema["properties"]) == {"session_id", "project", "issue", "force", "wait", "command_id"}
    assert claim.input_schema["required"] == ["project", "issue"]  # session_id: remembered
    assert "ISSUE_HELD" in (claim.description or "") and "NOT_FRESH_HOLDER" in (listed["verify_hold"].description or "")


async def test_two_agents_race_for_one_issue_and_meet_refusals_and_conflicts(connect: Connect, api: Api) -> None:
    async with connect() as a, connect() as b:
        me_a = await call(a, "register_agent", actor="agent-a")
        me_b = await call(b, "register_agent", actor="agent-b")
        # Both race for one issue; neither passes session_id: each connection remembers its own.
        first, second = await asyncio.gather(
            a.call_tool("claim_issue", {"project": "P", "issue": "P-1"}),
            b.call_tool("claim_issue", {"project": "P", "issue": "P-1"}),
        )
        winners = [r for r in (first, second) if not r.is_error]
        losers = [r for r in (first, second) if r.is_error]
        assert len(winners) == 1 and len(losers) == 1
        winner_sid = me_a["session_id"] if winners[0] is first else me_b["session_id"]
        error = losers[0].structured_content
        assert isinstance(error, dict)
        assert error["code"] == "ISSUE_HELD" and error["details"]["session_id"] == winner_sid
        leases = (await api.get("/v1/leases"))["leases"]
        assert [(x["issue"], x["session_id"]) for x in leases] == [("P-1", winner_sid)]

        # The remembered session answers get_issue_state's "as".
        state = await call(a, "get_issue_state", issue="P-1")
        assert state["state"] == ("self_is_holder" if winner_sid == me_a["session_id"] else "held")

        # A file-claim conflict names the holder.
        await call(a, "claim_files", issue="P-1", paths=["src/"])
        conflict = await refused(b, "claim_files", "FILES_CLAIMED", issue="P-2", paths=["src/app.py"])
        [c] = conflict["details"]["conflicts"]
        assert (c["path"], c["holder_path"], c["holder_session_id"]) == ("src/app.py", "src/", me_a["session_id"])

        # A stale fencing token is the publish gate's refusal.
        await refused(
            a if winner_sid == me_a["session_id"] else b,
            "verify_hold",
            "NOT_FRESH_HOLDER",
            issue="P-1",
            fencing_token=999,
        )

        # Invalid arguments are a VALIDATION tool error naming the field; the server lives on.
        bad = await refused(a, "claim_issue", "VALIDATION", project="P", issue=42)
        assert bad["details"]["field"] == "issue"
        assert (await refused(a, "claim_files", "VALIDATION", issue="P-1", paths=[]))["details"]["field"] == "paths"
        assert (await refused(a, "claim_issue", "VALIDATION", project="P", issue="P-3", colour="red"))["details"][
            "field"
        ] == "colour"
        await refused(a, "no_such_tool", "VALIDATION")
        assert (await call(a, "list_file_claims"))["file_claims"][0]["path"] == "src/"


async def test_an_agent_waits_in_line_reads_it_cancels_and_takes_a_capacity_slot(connect: Connect, api: Api) -> None:
    async with connect() as a, connect() as b:
        me_a = await call(a, "register_agent", actor="holder")
        me_b = await call(b, "register_agent", actor="waiter")
        await call(a, "claim_issue", project="P", issue="P-9")
        # wait: true answers the refusal as a tool error whose details give the place in line.
        waiting = await refused(b, "claim_issue", "ISSUE_HELD", project="P", issue="P-9", wait=True)
        assert waiting["details"]["waiting"] == {"place": 1, "waiters": 1}
        lines = (await call(a, "list_waits"))["waits"]
        assert [(w["kind"], w["key"], w["session_id"], w["place"]) for w in lines] == [
            ("issue", "P-9", me_b["session_id"], 1)
        ]
        assert (await call(b, "cancel_wait", issue="P-9"))["key"] == "P-9"  # the remembered session
        assert (await call(a, "list_waits"))["waits"] == []
        await refused(b, "cancel_wait", "NOT_HOLDER", issue="P-9")

        # Capacity: both take a slot of "ci" with their own tokens; a second name with no room is waited for.
        tokens = [
            (await call(x, "acquire_lease", name="ci", ttl_seconds=60, capacity=2))["fencing_token"] for x in (a, b)
        ]
        assert tokens == [1, 2]
        named = (await call(a, "list_named_leases"))["leases"]
        assert sorted((r["session_id"], r["capacity"]) for r in named) == sorted(
            [(me_a["session_id"], 2), (me_b["session_id"], 2)]
        )
        await call(a, "acquire_lease", name="leader", ttl_seconds=60)
        held = await refused(b, "acquire_lease", "LEASE_HELD", name="leader", ttl_seconds=60, wait=True)
        assert held["details"]["waiting"]["place"] == 1
        await call(a, "release_lease", name="leader")
        leader = [r for r in (await api.get("/v1/named-leases"))["leases"] if r["name"] == "leader"]
        assert [r["session_id"] for r in leader] == [me_b["session_id"]]  # handed to the waiter


async def test_answers_without_the_server_validation_and_unreachable(connect_nowhere: Connect) -> None:
    async with connect_nowhere() as client:
        error = await refused(client, "claim_issue", "VALIDATION", project="P", issue="P-1")
        assert error["details"] == {"field": "session_id"}
        assert "register_agent" in error["message"]
        # No server: a tool error the agent can act on, and the MCP server lives on.
        gone = await refused(client, "list_agents", "UNREACHABLE")
        assert "retry" in gone["message"]
        assert (await refused(client, "list_agents", "UNREACHABLE"))["code"] == "UNREACHABLE"


async def test_background_heartbeats_keep_a_short_ttl_session_live(
    start_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = start_server(ttl_seconds=3)
    api = Api(server.base_url)
    mcp_http: McpHttp | None = None
    try:
        silent = await api.register(actor="no-heartbeats")
        stdio = StdioServerParameters(
            command=sys.executable,
            args=["-m", "eventcoord.cli", "mcp"],
            env={"EVENTCOORD_URL": server.base_url, "EVENTCOORD_TOKEN": BOOTSTRAP},
        )
        mcp_http = McpHttp(server.base_url, tmp_path / "mcp.log")
        async with Client(stdio) as one, mcp_http.client() as two:
            kept = [
                (await call(c, "register_agent", actor=f"kept-{i}"))["session_id"] for i, c in enumerate((one, two))
            ]
            await asyncio.sleep(7)  # over 2 TTLs without a tool call
            agents = {x["session_id"]: x["live"] for x in (await api.get("/v1/agents"))["agents"]}
            assert agents[silent] is False  # the TTL really is short
            assert agents[kept[0]] is True and agents[kept[1]] is True
            beats = [e for e in await api.events("AgentHeartbeat") if e["data"]["session_id"] in kept]
            assert len(beats) >= 2 * 4  # every ttl/3 = 1 s, for each session
    finally:
        if mcp_http is not None:
            mcp_http.stop()
        await api.close()


async def test_disconnect_ends_the_session_and_releases_what_it_held(connect: Connect, api: Api) -> None:
    async with connect() as client:
        sid = (await call(client, "register_agent", actor="leaver"))["session_id"]
        await call(client, "claim_issue", project="P", issue="P-9")
        await call(client, "claim_files", issue="P-9", paths=["docs/"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (await api.get("/v1/leases"))["leases"]:
        await asyncio.sleep(0.1)
    assert (await api.get("/v1/leases"))["leases"] == []
    assert (await api.get("/v1/file-claims"))["file_claims"] == []
    [ended] = await api.events("AgentEnded")
    assert ended["data"]["session_id"] == sid
    [released] = await api.events("LeaseReleased")
    assert released["data"]["reason"] == "agent_ended"


def _mcp_children() -> list[int]:
    """Our child processes running ``eventcoord.cli mcp`` (the SDK spawns the stdio server)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        if ppid == os.getpid() and b"eventcoord.cli" in argv and b"mcp" in argv:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_terminated_mcp_server_ends_its_sessions(
    transport: str, server: ServerProcess, api: Api, tmp_path: Path
) -> None:
    import signal

    http = McpHttp(server.base_url, tmp_path / "mcp.log") if transport == "http" else None
    stdio = StdioServerParameters(
        command=sys.executable,
        args=["-m", "eventcoord.cli", "mcp"],
        env={"EVENTCOORD_URL": server.base_url, "EVENTCOORD_TOKEN": BOOTSTRAP},
    )
    try:
        async with http.client() if http else Client(stdio) as client:
            sid = (await call(client, "register_agent", actor="terminated"))["session_id"]
            await call(client, "claim_issue", project="P", issue="P-4")
            if http:
                http.proc.send_signal(signal.SIGTERM)
                http.proc.wait(20)
            else:
                [pid] = _mcp_children()
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not await api.events("AgentEnded"):
                await asyncio.sleep(0.1)
    finally:
        if http and http.proc.poll() is None:
            http.stop()
    [ended] = await api.events("AgentEnded")
    assert ended["data"]["session_id"] == sid
    assert (await api.get("/v1/leases"))["leases"] == []
