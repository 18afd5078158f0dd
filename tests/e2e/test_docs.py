"""docs/agents.md shows commands that work: its shell blocks run against a real server, and its
MCP client configuration starts an MCP server that finds the token by itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters
from tests.e2e.test_first_run import shell_block
from tests.helpers import BOOTSTRAP, Api, ServerProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


def run_block(name: str, server: ServerProcess, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVENTCOORD_", "GIT_"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        EVENTCOORD_URL=server.base_url,
        EVENTCOORD_TOKEN=BOOTSTRAP,
        HOME=str(cwd),
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.invalid",
    )
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", shell_block(DOC, name)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


async def test_the_hook_and_a_persons_day_run_as_shown(server: ServerProcess, api: Api, tmp_path: Path) -> None:
    hook = run_block("hook", server, tmp_path)
    assert hook.returncode == 0, hook.stdout + hook.stderr
    assert (tmp_path / "demo" / ".git" / "hooks" / "pre-push").exists()
    day = run_block("day", server, tmp_path)
    assert day.returncode == 0, day.stdout + day.stderr
    assert "taking this one" in day.stdout and '"fencing_token":2' in day.stdout
    assert (await api.get("/v1/leases"))["leases"] == []  # dana ended her session
    released = await api.events("LeaseReleased")
    assert [e["data"]["reason"] for e in released] == ["superseded", "agent_ended"]


async def test_init_and_the_commit_gate_run_as_shown(server: ServerProcess, api: Api, tmp_path: Path) -> None:
    init = run_block("init", server, tmp_path)
    assert init.returncode == 0, init.stdout + init.stderr
    assert "everything is in place" in init.stdout
    for made in (".claude/settings.json", ".codex/hooks.json", ".mcp.json", ".git/hooks/pre-commit"):
        assert (tmp_path / "proj" / made).is_file(), made
    gate = run_block("gate", server, tmp_path)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert gate.stdout.strip() == "refused, as it should be"
    # The lines the page shows, with the real session id.
    shown = re.search(r"<!-- tested: gate -->.*?```text\n(.*?)```", DOC.read_text(), re.S)
    assert shown
    [bob] = [a["session_id"] for a in (await api.get("/v1/agents"))["agents"] if a["actor_key"] == "bob"]
    expected = re.sub(r"s-18ef07…", bob, shown.group(1))
    assert gate.stderr == expected, gate.stderr


async def test_the_mcp_client_configuration_finds_the_local_token(server: ServerProcess, tmp_path: Path) -> None:
    m = re.search(r"```json\n(.*?)```", DOC.read_text(), re.S)
    assert m
    entry = json.loads(m.group(1))["mcpServers"]["eventcoord"]
    assert entry["args"] == ["mcp"]
    (tmp_path / ".eventcoord").mkdir()
    (tmp_path / ".eventcoord" / "admin-token").write_text(BOOTSTRAP + "\n")
    env = {**entry["env"], "EVENTCOORD_URL": server.base_url}  # the test server's port
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("eventcoord")), args=entry["args"], env=env, cwd=tmp_path
    )
    async with Client(params) as client:
        r = await client.call_tool("register_agent", {"actor": "configured"})
        assert not r.is_error, r.structured_content
