"""The ``eventcoord`` command line against a real database: migrate, token create, rebuild, serve."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.helpers import Api, ServerProcess, run_cli


async def test_migrate_then_token_create_gives_a_token_the_server_accepts(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    for _ in range(2):  # migrating twice is harmless
        done = run_cli("migrate", "--db", db_url)
        assert done.returncode == 0, done.stderr
        assert "migrated" in done.stdout
    created = run_cli("token", "create", "--db", db_url, "--workspace", "W", "--role", "agent")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token and "\n" not in token and " " not in token

    server = start_server()
    agent, admin = Api(server.base_url, token), Api(server.base_url)
    try:
        sid = await agent.register(actor="cli-agent")
        [event] = await agent.events()
        assert event["metadata"]["workspace"] == "W" and event["data"]["session_id"] == sid
        assert [a["session_id"] for a in (await agent.get("/v1/agents"))["agents"]] == [sid]
        # The token is an agent of W: no human sessions, no token issue, nothing of default.
        await agent.error({"type": "register_agent", "kind": "human"}, 403, "FORBIDDEN")
        await agent.error({"type": "issue_token", "role": "reader"}, 403, "FORBIDDEN")
        assert (await admin.get("/v1/agents"))["agents"] == []
        assert await admin.events() == []
    finally:
        await agent.close()
        await admin.close()


@pytest.mark.parametrize("role", ["admin", "human", "reader"])
def test_token_create_for_each_role_prints_a_distinct_token(db_url: str, role: str) -> None:
    first = run_cli("token", "create", "--db", db_url, "--workspace", "team-1", "--role", role)
    second = run_cli("token", "create", "--db", db_url, "--workspace", "team-1", "--role", role)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.strip() != second.stdout.strip()


def test_token_create_refuses_bad_input(db_url: str) -> None:
    bad_workspace = run_cli("token", "create", "--db", db_url, "--workspace", "no spaces", "--role", "agent")
    assert bad_workspace.returncode == 2 and "workspace" in bad_workspace.stderr
    bad_role = run_cli("token", "create", "--db", db_url, "--workspace", "W", "--role", "root")
    assert bad_role.returncode == 2 and "role" in bad_role.stderr
    missing = run_cli("token", "create", "--db", db_url, "--role", "agent")
    assert missing.returncode == 2


async def test_rebuild_reproduces_what_the_server_shows(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    server = start_server()
    api = Api(server.base_url)
    try:
        a = await api.register(actor="a", working_on="ISS-1")
        b = await api.register(runtime="codex", runtime_session_id="t-1", host="h")
        await api.ok({"type": "heartbeat_agent", "session_id": a, "working_on": "ISS-2"})
        await api.ok({"type": "end_agent", "session_id": b, "handoff_note": "done"})
        await api.ok({"type": "configure_project", "project": "P", "wip_limit": 2})
        before = (await api.get("/v1/agents"))["agents"]
        head = len(await api.events())
    finally:
        await api.close()
    server.stop()

    done = run_cli("rebuild", "--db", db_url)
    assert done.returncode == 0, done.stderr
    assert f"from {head} events" in done.stdout

    again = start_server()
    api = Api(again.base_url)
    try:
        assert (await api.get("/v1/agents"))["agents"] == before
        await api.error({"type": "heartbeat_agent", "session_id": b}, 409, "SESSION_NOT_LIVE")
        await api.ok({"type": "heartbeat_agent", "session_id": a})
    finally:
        await api.close()


def test_serve_refuses_invalid_settings_with_a_clear_message(db_url: str) -> None:
    for args, word in (
        (["--ttl-seconds", "0"], "--ttl-seconds"),
        (["--nats", "carrier-pigeon"], "--nats"),
        (["--port", "70000"], "--port"),
    ):
        done = run_cli("serve", "--db", db_url, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert word in done.stderr
    bad_db = run_cli("serve", "--db", "mysql://nowhere/x")
    assert bad_db.returncode == 2 and "--db" in bad_db.stderr


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EVENTCOORD_PORT", "abc"),
        ("EVENTCOORD_PORT", "70000"),
        ("EVENTCOORD_TTL_SECONDS", "1.5"),
        ("EVENTCOORD_DB_URL", "mysql://x"),
    ],
)
def test_a_bad_environment_setting_is_one_line_naming_it(tmp_path: Path, variable: str, value: str) -> None:
    for command in (["serve", "--nats", "off"], ["migrate"]):
        done = run_cli(*command, "--data-dir", str(tmp_path), env={variable: value})
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert done.stdout == ""
        [line] = done.stderr.splitlines()
        assert line.startswith("eventcoord: ") and variable in line and value in line, line


def test_migrate_defaults_to_sqlite_under_the_data_dir(tmp_path: Path) -> None:
    done = run_cli("migrate", "--data-dir", str(tmp_path / "state"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "state" / "eventcoord.db").exists()
    token = run_cli("token", "create", "--data-dir", str(tmp_path / "state"), "--workspace", "w", "--role", "reader")
    assert token.returncode == 0 and token.stdout.strip()


async def test_rebuild_while_the_server_serves_loses_nothing(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    server = start_server()
    api = Api(server.base_url)
    stop = asyncio.Event()
    failures: list[str] = []

    async def writer(i: int) -> int:
        sid = await api.register(actor=f"w{i}")
        beats = 0
        while not stop.is_set():
            r = await api.command({"type": "heartbeat_agent", "session_id": sid, "working_on": f"I-{beats % 3}"})
            if r.status_code != 200:
                failures.append(r.text)
            beats += 1
        return beats

    try:
        writers = [asyncio.create_task(writer(i)) for i in range(8)]
        await asyncio.sleep(0.5)
        done = await asyncio.to_thread(run_cli, "rebuild", "--db", db_url)
        stop.set()
        beats = await asyncio.gather(*writers)
        assert done.returncode == 0, done.stderr
        assert failures == [], failures
        before = (await api.get("/v1/agents"))["agents"]
        assert len(before) == 8 and all(a["live"] for a in before)
        events = await api.events()
        assert [e["position"] for e in events] == list(range(1, len(events) + 1))
        assert len(events) == 8 + sum(beats)
    finally:
        stop.set()
        await api.close()
    server.stop()
    # What the server left equals a rebuild from scratch.
    again = run_cli("rebuild", "--db", db_url)
    assert again.returncode == 0, again.stderr
    second = start_server()
    check = Api(second.base_url)
    try:
        assert (await check.get("/v1/agents"))["agents"] == before
    finally:
        await check.close()
