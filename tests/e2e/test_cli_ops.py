"""Every command and read as a subcommand of ``eventcoord``, against a real server: tables by
default, ``--json`` unchanged, the exit codes of docs/protocol.md#clients and the three ways to find the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from tests.helpers import BOOTSTRAP, Api, ServerProcess, free_port


def ec(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("EVENTCOORD_")}
    return subprocess.run(
        [sys.executable, "-m", "eventcoord.cli", *args],
        env={**base, **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def env(server: ServerProcess) -> dict[str, str]:
    return {"EVENTCOORD_URL": server.base_url, "EVENTCOORD_TOKEN": BOOTSTRAP}


def test_every_command_and_read_is_a_subcommand() -> None:
    from eventcoord.cli import build_parser
    from eventcoord.commands import COMMAND_TYPES

    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for tag, struct in COMMAND_TYPES.items():
        sub = choices[tag.replace("_", "-")]
        options = {o for a in sub._actions for o in a.option_strings}
        for field in struct.__struct_fields__:
            assert f"--{field.replace('_', '-')}" in options, (tag, field)
    reads = ("agents", "leases", "state", "file-claims", "conflicts", "heatmap", "queue", "messages", "events")
    for read in (*reads, "named-leases", "waits"):
        assert read in choices


async def test_a_session_claims_and_reads_with_tables_json_and_exit_codes(
    env: dict[str, str], api: Api, server: ServerProcess
) -> None:
    sid = ec("register-agent", "--actor", "alice", "--host", "laptop", "--print", "session_id", env=env)
    assert sid.returncode == 0, sid.stderr
    alice = sid.stdout.strip()
    assert alice.startswith("s-")
    claimed = ec("claim-issue", "--session-id", alice, "--project", "P", "--issue", "P-1", env=env)
    assert claimed.returncode == 0 and "fencing_token" in claimed.stdout and "P-1" in claimed.stdout

    # Reads: a readable table by default, the server's JSON unchanged with --json.
    table = ec("leases", env=env)
    assert (
        table.returncode == 0 and "P-1" in table.stdout and "alice" in table.stdout and "fencing_token" in table.stdout
    )
    raw = ec("leases", "--json", env=env)
    assert raw.returncode == 0
    assert (
        raw.stdout.strip()
        == httpx.get(server.base_url + "/v1/leases", headers={"authorization": f"Bearer {BOOTSTRAP}"}).text
    )
    state = ec("state", "P-1", "--as", alice, "--json", env=env)
    assert json.loads(state.stdout)["state"] == "self_is_holder"
    assert ec("agents", "--live", "--json", env=env).stdout.count(alice) == 1

    # Refused by the service: exit 1, the code as the first word on stderr; --json prints the envelope.
    bob = ec("register-agent", "--actor", "bob", "--print", "session_id", env=env).stdout.strip()
    held = ec("claim-issue", "--session-id", bob, "--project", "P", "--issue", "P-1", "--json", env=env)
    assert held.returncode == 1 and held.stderr.split()[0] == "ISSUE_HELD"
    envelope = json.loads(held.stdout)
    assert envelope["ok"] is False and envelope["error"]["details"]["session_id"] == alice
    # Commands with --json: the whole envelope.
    files = ec(
        "claim-files", "--session-id", alice, "--issue", "P-1", "--paths", "src/", "docs/a.md", "--json", env=env
    )
    answer = json.loads(files.stdout)
    assert answer["ok"] is True and answer["result"]["claimed"] == ["src/", "docs/a.md"] and answer["events"]
    conflict = ec("claim-files", "--session-id", bob, "--issue", "P-2", "--paths", "src/x.py", env=env)
    assert conflict.returncode == 1 and conflict.stderr.startswith("FILES_CLAIMED")
    # --payload takes JSON; list and literal options.
    queued = ec("enqueue-work", "--project", "Q", "--priority", "5", "--payload", '{"n": 1}', "--json", env=env)
    assert json.loads(queued.stdout)["ok"] is True
    assert json.loads(ec("queue", "--json", env=env).stdout)["items"][0]["payload"] == {"n": 1}
    heat = ec("heatmap", "--mode", "contention", "--depth", "1", env=env)
    assert heat.returncode == 0 and "src" in heat.stdout
    assert ec("conflicts", env=env).stdout.count("src/x.py") == 1
    ec("post-message", "--session-id", alice, "--channel", "issue:P-1", "--body", "hello there", env=env)
    assert "hello there" in ec("messages", "--channel", "issue:P-1", env=env).stdout
    events = json.loads(ec("events", "--after", "0", "--limit", "2", "--json", env=env).stdout)["events"]
    assert [e["position"] for e in events] == [1, 2]
    # heartbeat-agent --working-on '' sends null (clears the declaration).
    assert ec("heartbeat-agent", "--session-id", bob, "--working-on", "P-7", env=env).returncode == 0
    assert ec("heartbeat-agent", "--session-id", bob, "--working-on", "", env=env).returncode == 0
    [agent] = [a for a in (await api.get("/v1/agents"))["agents"] if a["session_id"] == bob]
    assert agent["working_on"] is None

    # Usage error: 2. Bad or missing token: 4. No server: 3.
    assert ec("claim-issue", "--session-id", alice, env=env).returncode == 2
    assert (
        ec(
            "claim-issue",
            "--session-id",
            alice,
            "--project",
            "P",
            "--issue",
            "P-1",
            "--force",
            "--priority",
            "1",
            env=env,
        ).returncode
        == 2
    )
    denied = ec("leases", env={**env, "EVENTCOORD_TOKEN": "nope"})
    assert denied.returncode == 4 and denied.stderr.split()[0] == "UNAUTHENTICATED"
    reader = await api.ok({"type": "issue_token", "role": "reader"})
    forbidden = ec("register-agent", "--actor", "r", env={**env, "EVENTCOORD_TOKEN": reader["token"]})
    assert forbidden.returncode == 4 and forbidden.stderr.split()[0] == "FORBIDDEN"
    gone = ec("leases", "--url", f"http://127.0.0.1:{free_port()}", env=env)
    assert gone.returncode == 3 and "UNREACHABLE" in gone.stderr
    # Validation refused by the service: 1, naming the field.
    bad = ec("claim-files", "--session-id", alice, "--issue", "P-1", "--paths", "/etc/passwd", env=env)
    assert bad.returncode == 1 and bad.stderr.startswith("VALIDATION")


async def test_waiting_lines_and_capacity_slots_from_the_command_line(
    env: dict[str, str], api: Api, server: ServerProcess
) -> None:
    """Waiting from the shell: --wait, the waits table and --json, cancel-wait, --capacity, project limits."""
    limits = ("--wip-limit", "4", "--lock-delay-seconds", "0", "--agent-wip-limit", "2")
    configured = ec("configure-project", "--project", "W", *limits, env=env)
    assert configured.returncode == 0, configured.stderr
    holder, first, second = (
        ec("register-agent", "--actor", actor, "--print", "session_id", env=env).stdout.strip()
        for actor in ("holder", "first", "second")
    )
    assert ec("claim-issue", "--session-id", holder, "--project", "W", "--issue", "W-1", env=env).returncode == 0
    for place, sid in enumerate((first, second), start=1):
        waiting = ec("claim-issue", "--session-id", sid, "--project", "W", "--issue", "W-1", "--wait", env=env)
        # Joining a line: exit 5, not 1 (a refusal); the code first, the details say the place.
        assert waiting.returncode == 5 and waiting.stderr.split()[0] == "ISSUE_HELD"
        assert f'"place":{place}' in waiting.stderr

    table = ec("waits", env=env)
    assert table.returncode == 0, table.stderr
    header, *rows = [line.split() for line in table.stdout.splitlines() if line.strip() and "───" not in line]
    assert header == ["kind", "key", "place", "session_id", "actor_key", "issue", "since"]
    assert [r[:5] for r in rows] == [["issue", "W-1", "1", first, "first"], ["issue", "W-1", "2", second, "second"]]
    # Paged: one row, then the command line for the rest; that page goes on at place 2.
    page = ec("waits", "--limit", "1", env=env).stdout.splitlines()
    assert page[2].split()[:4] == ["issue", "W-1", "1", first] and page[3].startswith("(more: --after "), page
    rest = ec("waits", "--limit", "1", "--after", page[3].removeprefix("(more: --after ").rstrip(")"), env=env)
    assert [line.split()[:4] for line in rest.stdout.splitlines()[2:]] == [["issue", "W-1", "2", second]], rest.stdout
    raw = ec("waits", "--json", env=env)
    assert (
        raw.stdout.strip()
        == httpx.get(server.base_url + "/v1/waits", headers={"authorization": f"Bearer {BOOTSTRAP}"}).text
    )
    cancelled = ec("cancel-wait", "--session-id", first, "--issue", "W-1", "--json", env=env)
    assert json.loads(cancelled.stdout)["result"]["key"] == "W-1"
    assert [w["session_id"] for w in json.loads(ec("waits", "--json", env=env).stdout)["waits"]] == [second]
    assert ec("cancel-wait", "--session-id", first, "--issue", "W-1", env=env).stderr.split()[0] == "NOT_HOLDER"

    # Capacity: two slots, each with its own token, shown per slot by named-leases.
    for sid in (holder, first):
        got = ec(
            "acquire-lease", "--session-id", sid, "--name", "gpu", "--ttl-seconds", "60", "--capacity", "2", env=env
        )
        assert got.returncode == 0, got.stderr
    slots = ec("named-leases", env=env)
    head = next(line for line in slots.stdout.splitlines() if line.strip())
    assert slots.returncode == 0 and head.split()[:2] == ["name", "capacity"]
    assert [line.split()[:2] for line in slots.stdout.splitlines() if line.split()[:1] == ["gpu"]] == [["gpu", "2"]] * 2
    leases = (await api.get("/v1/named-leases"))["leases"]
    assert sorted((x["session_id"], x["fencing_token"]) for x in leases) == sorted([(holder, 1), (first, 2)])
    assert ec("waits", "--url", server.base_url, env=env).returncode == 0


def test_the_server_is_found_from_flags_environment_or_the_local_data_folder(
    server: ServerProcess, tmp_path: Path
) -> None:
    # Flags
    flags = ec("agents", "--url", server.base_url, "--token", BOOTSTRAP, "--json")
    assert flags.returncode == 0 and json.loads(flags.stdout) == {"agents": []}
    # Environment
    assert ec("agents", env={"EVENTCOORD_URL": server.base_url, "EVENTCOORD_TOKEN": BOOTSTRAP}).returncode == 0
    # The local data folder: ./.eventcoord/admin-token (also from a subdirectory).
    project = tmp_path / "project"
    (project / ".eventcoord").mkdir(parents=True)
    (project / ".eventcoord" / "admin-token").write_text(BOOTSTRAP + "\n")
    (project / "sub").mkdir()
    for cwd in (project, project / "sub"):
        found = ec("agents", "--json", env={"EVENTCOORD_URL": server.base_url}, cwd=cwd)
        assert found.returncode == 0, found.stderr
    # No token anywhere: 401 and exit 4, saying where it looked.
    lost = ec("agents", env={"EVENTCOORD_URL": server.base_url}, cwd=tmp_path)
    assert lost.returncode == 4 and "token: none" in lost.stderr
