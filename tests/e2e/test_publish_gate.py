"""The publish gate where the damage happens: ``claim-issue --record``, ``hook install`` and a real
``git push`` to a local bare remote, against a real server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import BOOTSTRAP, Api, ServerProcess


def run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def ec(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, "-m", "eventcoord.cli", *args, cwd=cwd, env=env)


@pytest.fixture
def repo(tmp_path: Path, server: ServerProcess) -> tuple[Path, dict[str, str]]:
    """A clone of a bare remote, with one commit to push and the pre-push hook installed."""
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
    remote, work = tmp_path / "remote.git", tmp_path / "work"
    assert run("git", "init", "-q", "--bare", str(remote), cwd=tmp_path, env=env).returncode == 0
    assert run("git", "clone", "-q", str(remote), str(work), cwd=tmp_path, env=env).returncode == 0
    (work / "README").write_text("hello\n")
    run("git", "add", "README", cwd=work, env=env)
    assert run("git", "commit", "-qm", "first", cwd=work, env=env).returncode == 0
    installed = ec("hook", "install", "--repo", str(work), cwd=tmp_path, env=env)
    assert installed.returncode == 0, installed.stderr
    hook = work / ".git" / "hooks" / "pre-push"
    assert hook.stat().st_mode & 0o111
    return work, env


def push(work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run("git", "push", "-q", "origin", "HEAD:refs/heads/main", cwd=work, env=env)


def remote_has_main(work: Path, env: dict[str, str]) -> bool:
    return run("git", "ls-remote", "--exit-code", "origin", "refs/heads/main", cwd=work, env=env).returncode == 0


async def test_a_fresh_holder_pushes(repo: tuple[Path, dict[str, str]], api: Api) -> None:
    work, env = repo
    sid = await api.register(actor="alice")
    claimed = ec("claim-issue", "--session-id", sid, "--project", "P", "--issue", "P-1", "--record", cwd=work, env=env)
    assert claimed.returncode == 0, claimed.stderr
    config = {
        k: run("git", "config", "--get", k, cwd=work, env=env).stdout.strip()
        for k in ("eventcoord.session", "eventcoord.issue", "eventcoord.fencingToken")
    }
    assert config == {"eventcoord.session": sid, "eventcoord.issue": "P-1", "eventcoord.fencingToken": "1"}
    pushed = push(work, env)
    assert pushed.returncode == 0, pushed.stderr
    assert "hold on P-1 verified" in pushed.stderr
    assert remote_has_main(work, env)


async def test_a_holder_superseded_by_a_human_is_refused_naming_the_new_holder(
    repo: tuple[Path, dict[str, str]], api: Api
) -> None:
    work, env = repo
    agent = await api.register(actor="agent-7")
    assert (
        ec(
            "claim-issue", "--session-id", agent, "--project", "P", "--issue", "P-1", "--record", cwd=work, env=env
        ).returncode
        == 0
    )
    human = await api.register(actor="dana", kind="human")
    taken = await api.ok({"type": "claim_issue", "session_id": human, "project": "P", "issue": "P-1", "force": True})
    assert taken["fencing_token"] == 2
    pushed = push(work, env)
    assert pushed.returncode != 0
    assert "NOT_FRESH_HOLDER" in pushed.stderr
    assert f"dana (session {human})" in pushed.stderr  # the new holder, named
    assert not remote_has_main(work, env)
    # verify-hold itself: exit 1, the code as the first word on stderr.
    direct = ec("verify-hold", "--session-id", agent, "--issue", "P-1", "--fencing-token", "1", cwd=work, env=env)
    assert direct.returncode == 1 and direct.stderr.split()[0] == "NOT_FRESH_HOLDER"


def test_a_repository_with_no_recorded_hold_pushes_with_a_warning(repo: tuple[Path, dict[str, str]]) -> None:
    work, env = repo
    pushed = push(work, env)
    assert pushed.returncode == 0, pushed.stderr
    assert "warning: no hold recorded" in pushed.stderr
    assert remote_has_main(work, env)


def test_hook_install_keeps_the_repositorys_own_hook_and_runs_it_after_the_gate(
    repo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    work, env = repo
    hook = work / ".git" / "hooks" / "pre-push"
    own = '#!/bin/sh\necho pushed-by-the-users-hook > "$(git rev-parse --git-dir)/pushed"\nexit 0\n'
    hook.write_text(own)
    installed = ec("hook", "install", "--repo", str(work), cwd=tmp_path, env=env)
    assert installed.returncode == 0, installed.stderr
    text = hook.read_text()
    assert text.startswith("#!/bin/sh\n") and text.endswith(own.split("\n", 1)[1])  # the user's lines, after the gate
    again = ec("hook", "install", "--repo", str(work), cwd=tmp_path, env=env)
    assert again.returncode == 0 and hook.read_text() == text  # a second run changes nothing
    pushed = push(work, env)
    assert pushed.returncode == 0, pushed.stderr
    assert "warning: no hold recorded" in pushed.stderr  # the gate ran
    assert (work / ".git" / "pushed").read_text() == "pushed-by-the-users-hook\n"  # and then the user's hook
    removed = ec("hook", "install", "--repo", str(work), "--remove", cwd=tmp_path, env=env)
    assert removed.returncode == 0 and hook.read_text() == own
    assert not (work / ".git" / "hooks" / "pre-commit").exists()  # eventcoord's own file: gone


def test_hook_install_refuses_a_hook_it_cannot_merge_and_writes_nothing(
    repo: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    work, env = repo
    hooks = work / ".git" / "hooks"
    (hooks / "pre-commit").unlink()
    (hooks / "pre-push").write_text("#!/usr/bin/env python3\nprint('mine')\n")
    refused = ec("hook", "install", "--repo", str(work), cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "python3 script" in refused.stderr and "nothing was written" in refused.stderr
    assert (hooks / "pre-push").read_text() == "#!/usr/bin/env python3\nprint('mine')\n"
    assert not (hooks / "pre-commit").exists()


def test_record_outside_a_repository_is_a_usage_error(tmp_path: Path, server: ServerProcess) -> None:
    env = {
        **os.environ,
        "EVENTCOORD_URL": server.base_url,
        "EVENTCOORD_TOKEN": BOOTSTRAP,
        "GIT_CEILING_DIRECTORIES": str(tmp_path),
    }
    outside = tmp_path / "plain"
    outside.mkdir()
    done = ec(
        "claim-issue", "--session-id", "s-x", "--project", "P", "--issue", "P-1", "--record", cwd=outside, env=env
    )
    assert done.returncode == 2 and "git repository" in done.stderr
