"""The command line as a new user first meets it, against a real server: ``--version``,
``serve`` on a busy port, ``agent SID`` showing what a session holds, and ``--wait`` telling
"in line" (exit 5) from "refused" (exit 1)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from tests.helpers import BOOTSTRAP, Api, ServerProcess, free_port, run_cli


@pytest.fixture
def env(server: ServerProcess) -> dict[str, str]:
    return {"EVENTCOORD_URL": server.base_url, "EVENTCOORD_TOKEN": BOOTSTRAP}


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    done = run_cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"eventcoord {version('eventcoord')}"


def test_serve_on_a_busy_port_says_so_in_one_line_and_starts_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli("serve", "--data-dir", str(tmp_path / "data"), "--nats", "off", "--port", str(port))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "serving on" not in done.stdout
    [line] = done.stderr.splitlines()
    assert line.startswith("eventcoord: ") and f"127.0.0.1:{port}" in line and "in use" in line, line
    # Nothing started before the refusal: no first-run token minted, no database made.
    assert not (tmp_path / "data" / "admin-token").exists()
    assert not any((tmp_path / "data").glob("*.db*"))


def test_serve_says_it_serves_once_it_answers(tmp_path: Path) -> None:
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EVENTCOORD_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eventcoord.cli",
            "serve",
            "--data-dir",
            str(tmp_path),
            "--port",
            str(port),
            "--nats",
            "off",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=clean,
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "serving on" in line:
                break
        assert any(f"serving on http://127.0.0.1:{port}" in line for line in lines), lines
        # Said once bound and started: the very next request is answered.
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        assert lines[0].startswith("admin token of workspace default: ")  # the first run, before
    finally:
        proc.terminate()
        proc.wait(20)


async def test_agent_shows_what_a_live_session_holds(env: dict[str, str], api: Api) -> None:
    sid = await api.register(actor="alice")
    idle = await api.register(actor="bob")
    await api.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "P-1"})
    await api.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "P-2"})
    await api.ok({"type": "release_issue", "session_id": sid, "issue": "P-2"})
    await api.ok({"type": "claim_files", "session_id": sid, "issue": "P-1", "paths": ["src/core/", "README.md"]})
    await api.ok({"type": "acquire_lease", "session_id": sid, "name": "gpu", "ttl_seconds": 60})

    shown = run_cli("agent", sid, env=env)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "(none)" not in out and "holds nothing" not in out
    sections = out.split("holds issue leases")[1]
    held, rest = sections.split("holds file claims")
    claims, rest = rest.split("holds named leases")
    named, past = rest.split("held before")
    assert [row.split()[:3] for row in held.splitlines() if row.split()[:1] == ["P-1"]] == [["P-1", "P", "1"]]
    assert "P-2" not in held and "P-2" in past  # released: shown as held before, not as held
    assert {row.split()[0] for row in claims.splitlines() if row.split()[1:2] == ["P-1"]} == {"src/core/", "README.md"}
    assert [row.split()[:2] for row in named.splitlines() if row.split()[:1] == ["gpu"]] == [["gpu", "1"]]
    # A session that holds nothing says so; --json stays the server's answer.
    nothing = run_cli("agent", idle, env=env)
    assert nothing.returncode == 0 and "holds nothing" in nothing.stdout
    raw = json.loads(run_cli("agent", sid, "--json", env=env).stdout)
    assert raw == await api.get(f"/v1/agents/{sid}") | {"agent": raw["agent"]}
    assert raw["agent"]["session_id"] == sid


async def test_wait_that_joins_a_line_exits_5_and_a_refusal_still_exits_1(env: dict[str, str], api: Api) -> None:
    holder, waiter, other = [await api.register(actor=a) for a in ("holder", "waiter", "other")]
    await api.ok({"type": "claim_issue", "session_id": holder, "project": "P", "issue": "P-1"})
    await api.ok({"type": "claim_files", "session_id": holder, "issue": "P-1", "paths": ["src/"]})
    await api.ok({"type": "acquire_lease", "session_id": holder, "name": "gpu", "ttl_seconds": 60})

    joined = run_cli("claim-issue", "--session-id", waiter, "--project", "P", "--issue", "P-1", "--wait", env=env)
    assert joined.returncode == 5 and joined.stderr.split()[0] == "ISSUE_HELD", joined.stderr
    again = run_cli("claim-issue", "--session-id", waiter, "--project", "P", "--issue", "P-1", "--wait", env=env)
    assert again.returncode == 5, again.stderr  # keeps its place: still waiting
    # Without --wait it is a refusal; a second line at once is a refusal too.
    refused = run_cli("claim-issue", "--session-id", other, "--project", "P", "--issue", "P-1", env=env)
    assert refused.returncode == 1 and refused.stderr.split()[0] == "ISSUE_HELD"
    busy = run_cli("acquire-lease", "--session-id", waiter, "--name", "gpu", "--ttl-seconds", "60", "--wait", env=env)
    assert busy.returncode == 1 and busy.stderr.split()[0] == "ALREADY_WAITING"
    # claim-files and acquire-lease join their lines the same way.
    files = run_cli("claim-files", "--session-id", other, "--issue", "P-2", "--paths", "src/a.py", "--wait", env=env)
    assert files.returncode == 5 and files.stderr.split()[0] == "FILES_CLAIMED", files.stderr
    third = await api.register(actor="third")
    lease = run_cli("acquire-lease", "--session-id", third, "--name", "gpu", "--ttl-seconds", "60", "--wait", env=env)
    assert lease.returncode == 5 and lease.stderr.split()[0] == "LEASE_HELD", lease.stderr
    # The --json envelope is unchanged (the refusal with its place), and --help says what 5 means.
    raw = run_cli(
        "claim-issue", "--session-id", waiter, "--project", "P", "--issue", "P-1", "--wait", "--json", env=env
    )
    assert raw.returncode == 5 and json.loads(raw.stdout)["error"]["details"]["waiting"]["place"] == 1
    for command in ("claim-issue", "claim-files", "acquire-lease"):
        helped = run_cli(command, "--help")
        assert "5 not granted but waiting in line" in " ".join(helped.stdout.split()), command
    # The line is served: the holder releases and the waiter holds the issue.
    await api.ok({"type": "release_issue", "session_id": holder, "issue": "P-1"})
    state = run_cli("state", "P-1", "--as", waiter, "--json", env=env)
    assert json.loads(state.stdout)["state"] == "self_is_holder"
