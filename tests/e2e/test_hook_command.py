"""``eventcoord hook claude|codex``, the command a harness runs: stdin to the route, its answer on stdout,
and never a stopped agent because eventcoord is away (fail-open), unless fail-closed is asked for.

Against a real server on both backends, and against real stand-in HTTP servers on loopback
for what a healthy server never does (a 5xx, no answer, an answer cut short).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers import BOOTSTRAP, Api, ServerProcess, free_port

CLAIMING = [
    ("claude", "Write", {"file_path": "{cwd}/src/app.py", "content": "x\n"}),
    ("claude", "Edit", {"file_path": "{cwd}/src/app.py", "old_string": "a", "new_string": "b"}),
    ("claude", "MultiEdit", {"file_path": "{cwd}/src/app.py", "edits": []}),
    ("claude", "NotebookEdit", {"notebook_path": "{cwd}/nb.ipynb", "new_source": "x"}),
    ("codex", "apply_patch", {"command": "*** Begin Patch\n*** Add File: {cwd}/a.txt\n+a\n*** End Patch\n"}),
]


def payload(cwd: Path, event: str, session: str = "harness-1", **fields: Any) -> bytes:
    """A hook payload shaped as the real harnesses send it (see shared reference harnesses.md)."""
    body = {
        "session_id": session,
        "transcript_path": str(cwd / "transcript.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": event,
        **fields,
    }
    text = json.dumps(body).replace("{cwd}", str(cwd))
    return text.encode()


def hook(
    harness: str, stdin: bytes, env: dict[str, str], cwd: Path | None = None, *args: str
) -> subprocess.CompletedProcess[bytes]:
    """Run the installed console script as a harness does: payload on stdin, bytes out."""
    script = Path(sys.executable).with_name("eventcoord")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EVENTCOORD_")}
    return subprocess.run(
        [str(script), "hook", harness, *args],
        input=stdin,
        capture_output=True,
        env={**clean, **env},
        cwd=cwd,
        timeout=60,
    )


def one_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert text.endswith("\n") and text.count("\n") == 1, text
    return text


@pytest.fixture
def env(server: ServerProcess) -> dict[str, str]:
    return {"EVENTCOORD_URL": server.base_url, "EVENTCOORD_TOKEN": BOOTSTRAP}


# --- against the real route -----------------------------------------------------------------


async def test_stdout_is_exactly_the_routes_answer_and_a_held_file_is_denied(
    env: dict[str, str], server: ServerProcess, api: Api, tmp_path: Path
) -> None:
    write = {"tool_name": "Write", "tool_input": {"file_path": str(tmp_path / "src/app.py"), "content": "x"}}
    first = hook("claude", payload(tmp_path, "PreToolUse", "harness-a", **write), env)
    assert (first.returncode, first.stdout, first.stderr) == (0, b"{}", b"")
    [claim] = (await api.get("/v1/file-claims"))["file_claims"]
    assert claim["path"] == "src/app.py"

    other = payload(tmp_path, "PreToolUse", "harness-b", **write)
    denied = hook("claude", other, env)
    assert denied.returncode == 0 and denied.stderr == b""
    direct = httpx.post(
        server.base_url + "/v1/hooks/claude", content=other, headers={"authorization": f"Bearer {BOOTSTRAP}"}
    )
    assert denied.stdout == direct.content  # byte for byte, no newline added
    answer = json.loads(denied.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "src/app.py" in answer["permissionDecisionReason"]
    assert claim["actor_key"] in answer["permissionDecisionReason"]


async def test_codex_apply_patch_goes_to_the_codex_route(env: dict[str, str], api: Api, tmp_path: Path) -> None:
    patch = f"*** Begin Patch\n*** Add File: {tmp_path}/a.txt\n+a\n*** Update File: b.txt\n@@\n-x\n+y\n*** End Patch\n"
    done = hook("codex", payload(tmp_path, "PreToolUse", tool_name="apply_patch", tool_input={"command": patch}), env)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"{}", b"")
    [registered] = await api.events("AgentRegistered")
    assert registered["data"]["runtime"] == "codex"
    claims = (await api.get("/v1/file-claims"))["file_claims"]
    assert sorted(c["path"] for c in claims) == ["a.txt", "b.txt"]


def test_the_token_is_found_in_the_data_folder_of_a_parent(server: ServerProcess, tmp_path: Path) -> None:
    (tmp_path / ".eventcoord").mkdir()
    (tmp_path / ".eventcoord" / "admin-token").write_text(BOOTSTRAP + "\n")
    deep = tmp_path / "repo" / "src"
    deep.mkdir(parents=True)
    started = hook("claude", payload(deep, "SessionStart", source="startup"), {"EVENTCOORD_URL": server.base_url}, deep)
    assert started.returncode == 0 and started.stderr == b""
    assert json.loads(started.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    # --url and --token on the command line win over the environment.
    flags = hook(
        "claude",
        payload(deep, "UserPromptSubmit", prompt="go"),
        {"EVENTCOORD_URL": f"http://127.0.0.1:{free_port()}", "EVENTCOORD_TOKEN": "wrong"},
        deep,
        "--url",
        server.base_url,
        f"--token={BOOTSTRAP}",
    )
    assert (flags.returncode, flags.stderr) == (0, b"") and json.loads(flags.stdout) is not None


async def test_a_refused_hook_is_one_line_and_never_stops_the_agent(
    env: dict[str, str], api: Api, tmp_path: Path
) -> None:
    write = payload(tmp_path, "PreToolUse", tool_name="Write", tool_input={"file_path": str(tmp_path / "a.py")})
    cases = {
        "UNAUTHENTICATED": (write, {**env, "EVENTCOORD_TOKEN": "not-a-token"}),
        "FORBIDDEN": (write, {**env, "EVENTCOORD_TOKEN": await api.token("reader")}),
        "VALIDATION": (b'{"session_id": "x", "cwd": "/"}', env),
    }
    for code, (stdin, environment) in cases.items():
        done = hook("claude", stdin, environment)
        assert (done.returncode, done.stdout) == (0, b""), code
        line = one_line(done.stderr)
        assert code in line and "not coordinated" in line, line
        if code == "UNAUTHENTICATED":
            assert "token from EVENTCOORD_TOKEN" in line
        if code == "VALIDATION":
            assert "hook_event_name" in line
    # Fail-closed: a refused hook is no coordination either, so a claiming PreToolUse stops.
    closed = hook("claude", write, {**env, "EVENTCOORD_TOKEN": "not-a-token", "EVENTCOORD_HOOK_FAIL": "closed"})
    assert closed.returncode == 2 and closed.stdout == b"" and b"UNAUTHENTICATED" in closed.stderr
    assert (await api.get("/v1/file-claims"))["file_claims"] == []


# --- when eventcoord is away ----------------------------------------------------------------


class StandIn:
    """A real HTTP server on loopback that misbehaves as asked: ``"5xx"`` answers 503 without an
    envelope, ``"silent"`` reads the request and never answers, ``"cut"`` sends the status and
    headers of a long body and then nothing. It answers nobody until ``release`` is set."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.release = threading.Event()
        self.requests: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(
                next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
            )
            while len(body) < length:
                body += conn.recv(65536)
            self.requests.append(body)
            if self.mode == "5xx":
                conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 5\r\nconnection: close\r\n\r\nbusy!")
                return
            if self.mode == "cut":
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
            self.release.wait(120)

    def close(self) -> None:
        self.release.set()
        self.listener.close()


@pytest.fixture(params=["5xx", "silent", "cut"])
def stand_in(request: pytest.FixtureRequest) -> Iterator[StandIn]:
    s = StandIn(request.param)
    yield s
    s.close()


def test_a_5xx_or_no_answer_within_2s_fails_open(stand_in: StandIn, tmp_path: Path) -> None:
    env = {"EVENTCOORD_URL": stand_in.url, "EVENTCOORD_TOKEN": "t"}
    stdin = payload(tmp_path, "PreToolUse", tool_name="Write", tool_input={"file_path": str(tmp_path / "a.py")})
    done = hook("claude", stdin, env)
    # The stand-in answers nobody until released (after this), so the hook gave up on its own.
    assert not stand_in.release.is_set()
    assert (done.returncode, done.stdout) == (0, b"")
    line = one_line(done.stderr)
    assert ("HTTP 503" if stand_in.mode == "5xx" else "within 2 s") in line, line
    assert stand_in.requests == [stdin]  # the payload went as the harness gave it
    closed = hook("claude", stdin, {**env, "EVENTCOORD_HOOK_FAIL": "closed"})
    assert closed.returncode == 2 and closed.stdout == b""
    assert b"EVENTCOORD_HOOK_FAIL=closed" in closed.stderr and b"not made" in closed.stderr


@pytest.mark.parametrize(("harness", "tool", "tool_input"), CLAIMING)
def test_fail_closed_stops_every_claiming_tool_when_no_server_answers(
    harness: str, tool: str, tool_input: dict[str, Any], tmp_path: Path
) -> None:
    env = {"EVENTCOORD_URL": f"http://127.0.0.1:{free_port()}", "EVENTCOORD_HOOK_FAIL": "closed"}
    done = hook(harness, payload(tmp_path, "PreToolUse", tool_name=tool, tool_input=tool_input), env)
    assert done.returncode == 2 and done.stdout == b""
    reason = done.stderr.decode()
    assert "cannot reach the eventcoord server" in reason and "EVENTCOORD_HOOK_FAIL=closed" in reason
    # Fail-open (the default) lets the same call through.
    opened = hook(
        harness,
        payload(tmp_path, "PreToolUse", tool_name=tool, tool_input=tool_input),
        {**env, "EVENTCOORD_HOOK_FAIL": "open"},
    )
    assert (opened.returncode, opened.stdout) == (0, b"") and "not coordinated" in one_line(opened.stderr)


@pytest.mark.parametrize(
    ("event", "fields"),
    [
        ("SessionStart", {"source": "startup"}),
        ("UserPromptSubmit", {"prompt": "go"}),
        ("PreToolUse", {"tool_name": "Read", "tool_input": {"file_path": "/etc/hosts"}}),
        ("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "ls"}}),
        ("PostToolUse", {"tool_name": "Write", "tool_input": {"file_path": "a"}, "tool_response": {}}),
        ("Stop", {"stop_hook_active": False, "last_assistant_message": "done"}),
        ("SessionEnd", {"reason": "other"}),
    ],
)
def test_fail_closed_lets_every_other_event_through(event: str, fields: dict[str, Any], tmp_path: Path) -> None:
    env = {"EVENTCOORD_URL": f"http://127.0.0.1:{free_port()}", "EVENTCOORD_HOOK_FAIL": "closed"}
    for harness in ("claude", "codex"):
        done = hook(harness, payload(tmp_path, event, **fields), env)
        assert (done.returncode, done.stdout) == (0, b""), (harness, event)
        assert "not coordinated" in one_line(done.stderr)
    garbage = hook("claude", b"not json", env)  # nothing shows it would claim: it passes
    assert garbage.returncode == 0 and garbage.stdout == b""
