"""Fixtures of the real-harness tests: the installed CLIs, a home for each, a git repository.

The harnesses are installed once (``harnesses.install``) and reused; a machine without
Node.js or npm fails these tests rather than skipping them.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.harness.harnesses import VENV_BIN, ClaudeCode, Codex, Installed, install
from tests.helpers import Api, ServerProcess, run_cli

ORIGINAL = "def main() -> None:\n    print('alice is rewriting this')\n"


@pytest.fixture(scope="session")
def harnesses() -> Installed:
    try:
        return install()
    except RuntimeError as e:
        pytest.fail(str(e))


@pytest.fixture
def claude(harnesses: Installed, tmp_path: Path) -> ClaudeCode:
    return ClaudeCode(harnesses.claude, tmp_path / "claude-home")


@pytest.fixture
def codex(harnesses: Installed, tmp_path: Path) -> Codex:
    return Codex(harnesses.codex, tmp_path / "codex-home")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit (``README.md``, ``src/app.py``) (its real path: harnesses resolve symlinks)."""
    path = (tmp_path / "repo").resolve()
    path.mkdir()
    env_args = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README.md").write_text("a repository with agents in it\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text(ORIGINAL)
    subprocess.run(["git", *env_args, "add", "README.md", "src/app.py"], cwd=path, check=True)
    subprocess.run(["git", *env_args, "commit", "-qm", "first"], cwd=path, check=True)
    return path


@pytest.fixture
def coordinated(repo: Path) -> Path:
    """``repo`` with ``src/app.py`` committed and set up by the real ``eventcoord init``."""
    done = run_cli("init", "--repo", str(repo), env={"PATH": os.pathsep.join([str(VENV_BIN), os.environ["PATH"]])})
    assert done.returncode == 0, done.stdout + done.stderr
    return repo


@pytest.fixture
async def holder(api: Api) -> str:
    """Another live session, ``alice``, holding ``src/app.py`` exclusively under APP-1."""
    alice = await api.register(actor="alice")
    await api.ok({"type": "claim_files", "session_id": alice, "issue": "APP-1", "paths": ["src/app.py"]})
    return alice


@pytest.fixture
async def agent_env(api: Api, server: ServerProcess) -> dict[str, str]:
    """What a harness needs in its environment to reach the test's server (an agent token)."""
    return {"EVENTCOORD_URL": server.base_url, "EVENTCOORD_TOKEN": await api.token("agent")}


def runtime_digest(harness_session_id: str) -> str:
    """How eventcoord keys an actor by its runtime's session id (never stored raw)."""
    return hashlib.sha256(("eventcoord:" + harness_session_id).encode()).hexdigest()[:24]


async def harness_sessions(api: Api, harness: str) -> list[dict[str, Any]]:
    """The eventcoord sessions that hooks of ``harness`` registered."""
    agents = await api.agents()
    return [a for a in agents.values() if a["identity_source"] == f"runtime-session-id:{harness}"]


def claims_reader(server: ServerProcess, env: dict[str, str]) -> Callable[[], list[dict[str, Any]]]:
    """Reads the unreleased file claims (for a model stand-in to look while the harness runs)."""

    def read() -> list[dict[str, Any]]:
        headers = {"authorization": f"Bearer {env['EVENTCOORD_TOKEN']}"}
        rows: list[dict[str, Any]] = httpx.get(f"{server.base_url}/v1/file-claims", headers=headers).json()[
            "file_claims"
        ]
        return rows

    return read
