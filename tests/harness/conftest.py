"""Fixtures of the real-harness tests: the installed CLIs, a home for each, a git repository.

The harnesses are installed once (``harnesses.install``) and reused; a machine without
Node.js or npm fails these tests rather than skipping them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.harness.harnesses import ClaudeCode, Codex, Installed, install


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
    """An empty git repository with one commit (its real path: harnesses resolve symlinks)."""
    path = (tmp_path / "repo").resolve()
    path.mkdir()
    env_args = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README.md").write_text("a repository with agents in it\n")
    subprocess.run(["git", *env_args, "add", "README.md"], cwd=path, check=True)
    subprocess.run(["git", *env_args, "commit", "-qm", "first"], cwd=path, check=True)
    return path
