"""The pre-commit gate with a real ``git commit`` against a real server: a staged file another live
session has claimed exclusively stops the commit, naming path, holder and issue."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import BOOTSTRAP, Api, ServerProcess, free_port


def run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def commits(work: Path, env: dict[str, str]) -> int:
    return int(run("git", "rev-list", "--count", "HEAD", cwd=work, env=env).stdout.strip())


def commit(work: Path, env: dict[str, str], *paths: str, message: str = "change") -> subprocess.CompletedProcess[str]:
    """Write each path, stage it and commit; the completed ``git commit``."""
    for path in paths:
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(f"{message}\n")
        assert run("git", "add", path, cwd=work, env=env).returncode == 0
    return run("git", "commit", "-qm", message, cwd=work, env=env)


@pytest.fixture
def repo(tmp_path: Path, server: ServerProcess) -> tuple[Path, dict[str, str]]:
    """A repository with one commit and eventcoord's git hooks installed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVENTCOORD_", "GIT_"))}
    env.update(
        EVENTCOORD_URL=server.base_url,
        EVENTCOORD_TOKEN=BOOTSTRAP,
        HOME=str(tmp_path),
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.invalid",
    )
    work = tmp_path / "work"
    assert run("git", "init", "-q", str(work), cwd=tmp_path, env=env).returncode == 0
    assert commit(work, env, "README").returncode == 0
    installed = run(
        sys.executable, "-m", "eventcoord.cli", "hook", "install", "--repo", str(work), cwd=tmp_path, env=env
    )
    assert installed.returncode == 0, installed.stderr
    assert (work / ".git" / "hooks" / "pre-commit").stat().st_mode & 0o111
    return work, env


@pytest.fixture
async def holders(api: Api) -> dict[str, str]:
    """alice holds lib/a.py; bob holds src/ (a directory) and docs/*.md (a glob) for P-2."""
    alice, bob = await api.register(actor="alice"), await api.register(actor="bob")
    await api.ok({"type": "claim_files", "session_id": alice, "issue": "P-1", "paths": ["lib/a.py"]})
    await api.ok({"type": "claim_files", "session_id": bob, "issue": "P-2", "paths": ["src/", "docs/*.md"]})
    return {"alice": alice, "bob": bob}


async def test_a_staged_file_another_session_holds_stops_the_commit(
    repo: tuple[Path, dict[str, str]], holders: dict[str, str]
) -> None:
    work, env = repo
    as_alice = {**env, "EVENTCOORD_SESSION": holders["alice"]}
    before = commits(work, env)
    refused = commit(work, as_alice, "src/x.py", "README")
    assert refused.returncode == 1
    assert commits(work, env) == before  # not made
    assert f"src/x.py (claim src/): held by bob (session {holders['bob']}) for issue P-2" in refused.stderr
    assert "README" not in refused.stderr  # an unclaimed path is not named
    assert "commit refused" in refused.stderr

    # The glob claim covers what it matches; the committer named by git config, not the environment.
    run("git", "reset", "-q", cwd=work, env=env)
    assert run("git", "config", "eventcoord.session", holders["alice"], cwd=work, env=env).returncode == 0
    globbed = commit(work, env, "docs/guide.md")
    assert globbed.returncode == 1 and "docs/guide.md (claim docs/*.md): held by bob" in globbed.stderr
    run("git", "reset", "-q", cwd=work, env=env)

    # Her own claim and unclaimed paths pass; a path the glob does not match passes.
    mine = commit(work, as_alice, "lib/a.py", "docs/deep/notes.md", "notes.txt")
    assert mine.returncode == 0, mine.stderr
    assert commits(work, env) == before + 1


async def test_deleting_or_renaming_a_held_file_is_refused_too(
    repo: tuple[Path, dict[str, str]], api: Api, holders: dict[str, str]
) -> None:
    work, env = repo
    as_bob = {**env, "EVENTCOORD_SESSION": holders["bob"]}
    assert commit(work, as_bob, "src/old.py").returncode == 0  # bob's own claim
    as_alice = {**env, "EVENTCOORD_SESSION": holders["alice"]}
    assert run("git", "rm", "-q", "src/old.py", cwd=work, env=env).returncode == 0
    deleted = run("git", "commit", "-qm", "delete", cwd=work, env=as_alice)
    assert deleted.returncode == 1 and "src/old.py (claim src/): held by bob" in deleted.stderr
    run("git", "reset", "-q", "--hard", cwd=work, env=env)
    assert run("git", "mv", "src/old.py", "moved.py", cwd=work, env=env).returncode == 0
    moved = run("git", "commit", "-qm", "move", cwd=work, env=as_alice)
    assert moved.returncode == 1 and "src/old.py (claim src/)" in moved.stderr
    run("git", "reset", "-q", "--hard", cwd=work, env=env)
    # `git commit PATH` commits through a temporary index: the gate reads that one.
    (work / "src" / "old.py").write_text("changed\n")
    partial = run("git", "commit", "-qm", "partial", "src/old.py", cwd=work, env=as_alice)
    assert partial.returncode == 1 and "src/old.py" in partial.stderr
    # Once bob's session ends its claims are released, and the same commit passes.
    await api.ok({"type": "end_agent", "session_id": holders["bob"]})
    assert run("git", "commit", "-qm", "partial", "src/old.py", cwd=work, env=as_alice).returncode == 0


async def test_a_shared_claim_does_not_stop_a_commit(repo: tuple[Path, dict[str, str]], api: Api) -> None:
    work, env = repo
    carol = await api.register(actor="carol")
    await api.ok({"type": "claim_files", "session_id": carol, "issue": "P-3", "paths": ["web/"], "exclusive": False})
    me = await api.register(actor="me")
    assert commit(work, {**env, "EVENTCOORD_SESSION": me}, "web/index.html").returncode == 0


async def test_without_a_known_session_it_warns_with_the_same_text(
    repo: tuple[Path, dict[str, str]], holders: dict[str, str]
) -> None:
    work, env = repo
    before = commits(work, env)
    warned = commit(work, env, "src/y.py")
    assert warned.returncode == 0, warned.stderr
    assert commits(work, env) == before + 1
    assert "src/y.py (claim src/): held by bob" in warned.stderr and "P-2" in warned.stderr
    assert "warning: committing anyway" in warned.stderr and "EVENTCOORD_SESSION" in warned.stderr


async def test_an_unreachable_server_lets_the_commit_through_with_a_warning(
    repo: tuple[Path, dict[str, str]], holders: dict[str, str]
) -> None:
    work, env = repo
    away = {**env, "EVENTCOORD_SESSION": holders["alice"], "EVENTCOORD_URL": f"http://127.0.0.1:{free_port()}"}
    passed = commit(work, away, "src/z.py")
    assert passed.returncode == 0, passed.stderr
    assert "warning: cannot reach the eventcoord server" in passed.stderr
    refused_token = commit(
        work, {**away, "EVENTCOORD_URL": env["EVENTCOORD_URL"], "EVENTCOORD_TOKEN": "bad"}, "src/w.py"
    )
    assert refused_token.returncode == 0 and "did not list the file claims (HTTP 401" in refused_token.stderr
