"""The pre-commit gate with a real ``git commit`` against a real server: a staged file another live
session has claimed exclusively stops the commit, naming path, holder and issue."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
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
    # Nothing of a harness session the suite itself may run in (CLAUDE_CODE_SESSION_ID, …).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVENTCOORD_", "GIT_", "CLAUDE_CODE_", "CODEX_"))}
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


async def test_a_commit_inside_a_harness_session_is_that_sessions_own(
    repo: tuple[Path, dict[str, str]], api: Api, holders: dict[str, str]
) -> None:
    """Inside Claude Code (CLAUDE_CODE_SESSION_ID) or Codex (CODEX_THREAD_ID) the committer is
    the session the harness's hooks are bound to, even when git config names another one."""
    work, env = repo
    for harness, variable, harness_sid in (
        ("claude", "CLAUDE_CODE_SESSION_ID", "eb58c0de-2f1e-4c6b-9a7d-000000000001"),
        ("codex", "CODEX_THREAD_ID", "01a25201-63f6-7d12-94cc-0786cc7405b0"),
    ):
        mine = f"lib/{harness}.py"
        common = {"session_id": harness_sid, "cwd": str(work)}
        start = {**common, "hook_event_name": "SessionStart", "source": "startup"}
        write = {
            **common,
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(work / mine), "content": "x"},
        }
        assert (await api.http.post(f"/v1/hooks/{harness}", json=start)).status_code == 200
        r = await api.http.post(f"/v1/hooks/{harness}", json=write)
        assert r.status_code == 200 and r.json() == {}, r.text  # claimed
        bound = await api.get(f"/v1/hooks/{harness}/session", id=harness_sid)
        assert bound["harness"] == harness and bound["live"] is True
        # git config names alice: outside the harness she commits, and the harness's file is refused.
        assert run("git", "config", "eventcoord.session", holders["alice"], cwd=work, env=env).returncode == 0
        outside = commit(work, env, mine, message=f"outside {harness}")
        assert outside.returncode == 1, outside.stderr
        assert f"{mine}: held by " in outside.stderr and bound["session_id"] in outside.stderr
        run("git", "reset", "-q", cwd=work, env=env)
        # Inside the harness the same commit is its own; alice's file is still refused, naming her.
        inside = {**env, variable: harness_sid}
        assert commit(work, inside, mine, message=f"inside {harness}").returncode == 0
        refused = commit(work, inside, "lib/a.py", message=f"not mine {harness}")
        assert refused.returncode == 1 and f"lib/a.py: held by alice (session {holders['alice']})" in refused.stderr
        run("git", "reset", "-q", cwd=work, env=env)
        # A harness session no hook was answered for names no one: git config decides again.
        stranger = {**env, variable: "never-seen"}
        assert commit(work, stranger, "lib/a.py", message=f"as alice {harness}").returncode == 0


async def test_the_hook_session_route_answers_404_for_an_unknown_session_and_reads_for_any_role(
    api: Api,
) -> None:
    r = await api.http.get("/v1/hooks/claude/session", params={"id": "nobody"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND", r.text
    r = await api.http.get("/v1/hooks/claude/session")
    assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION", r.text
    r = await api.http.get("/v1/hooks/other/session", params={"id": "x"})
    assert r.status_code == 422, r.text
    odd = "ü/../\u2028" + "x" * 5000  # any length and characters
    payload = {"session_id": odd, "cwd": "/w", "hook_event_name": "SessionStart"}
    assert (await api.http.post("/v1/hooks/codex", json=payload)).status_code == 200
    reader = await api.client("reader")
    found = await reader.get("/v1/hooks/codex/session", id=odd)
    assert found["harness"] == "codex" and found["live"] is True


def _venv_without_eventcoord(tmp_path: Path) -> Path:
    """A virtualenv that sees this one's dependencies and holds its own copy of eventcoord
    (the installation a git hook names); returns its python."""
    import eventcoord

    venv = tmp_path / "other-venv"
    assert subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120).returncode == 0
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    shutil.copytree(Path(eventcoord.__file__).parent, Path(site) / "eventcoord")
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


async def test_a_gate_whose_eventcoord_is_gone_says_what_to_do_and_lets_the_commit_through(
    tmp_path: Path, repo: tuple[Path, dict[str, str]], holders: dict[str, str]
) -> None:
    """The installation the hook names is gone and no eventcoord is on the hook's PATH: not the
    shell's cryptic 127 that stops every commit, but a warning saying what to do."""
    work, env = repo
    python = _venv_without_eventcoord(tmp_path)
    installed = run(str(python), "-m", "eventcoord.cli", "hook", "install", "--repo", str(work), cwd=tmp_path, env=env)
    assert installed.returncode == 0, installed.stderr
    site = Path(
        run(
            str(python),
            "-c",
            "import eventcoord, os; print(os.path.dirname(eventcoord.__file__))",
            cwd=tmp_path,
            env=env,
        ).stdout.strip()
    )
    assert str(site).startswith(str(tmp_path)) and str(python) in (work / ".git" / "hooks" / "pre-commit").read_text()
    shutil.rmtree(site)  # uninstalled: the interpreter is still there, eventcoord is not
    bare = {
        **env,
        "PATH": os.pathsep.join(str(Path(shutil.which(t) or t).parent) for t in ("git", "sh")),
        "EVENTCOORD_SESSION": holders["alice"],
    }
    assert shutil.which("eventcoord", path=bare["PATH"]) is None
    before = commits(work, env)
    passed = commit(work, bare, "src/x.py")
    assert passed.returncode == 0, passed.stderr
    assert commits(work, env) == before + 1
    assert "the pre-commit gate did not run: eventcoord is not on this hook's PATH" in passed.stderr
    assert "committing without the gate" in passed.stderr and "Put eventcoord on the PATH" in passed.stderr
    # With an eventcoord on the hook's PATH the gate runs again, and refuses bob's file.
    on_path = {**bare, "PATH": os.pathsep.join([str(Path(sys.executable).parent), bare["PATH"]])}
    refused = commit(work, on_path, "src/y.py")
    assert refused.returncode == 1 and "src/y.py (claim src/): held by bob" in refused.stderr
