"""``eventcoord init``: the real command in real git repositories, empty or already set up by their user.

What the written files make the real harnesses do is shown in tests/harness/; here: what
is written, that everything of the user's is kept, idempotence, --check and --remove.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import run_cli

VENV_BIN = str(Path(sys.executable).parent)
FILES = (".claude/settings.json", ".codex/hooks.json", ".mcp.json", ".git/hooks/pre-commit", ".git/hooks/pre-push")
EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"]


def init(repo: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path if path is not None else os.pathsep.join([VENV_BIN, os.environ["PATH"]])}
    return run_cli("init", "--repo", str(repo), *args, env=env)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def snapshot(repo: Path) -> dict[str, bytes | None]:
    return {name: (repo / name).read_bytes() if (repo / name).exists() else None for name in FILES}


def load(repo: Path, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((repo / name).read_text())
    return doc


def own_groups(doc: dict[str, Any], harness: str) -> dict[str, list[dict[str, Any]]]:
    """Per event, the groups whose hooks run ``eventcoord hook <harness>``."""
    return {
        event: [g for g in groups if any(h.get("command") == f"eventcoord hook {harness}" for h in g["hooks"])]
        for event, groups in doc["hooks"].items()
    }


def test_init_on_an_empty_repository_writes_every_file_and_says_what_is_left(repo: Path) -> None:
    done = init(repo)
    assert done.returncode == 0, done.stderr

    claude = own_groups(load(repo, ".claude/settings.json"), "claude")
    codex = own_groups(load(repo, ".codex/hooks.json"), "codex")
    assert list(claude) == EVENTS and list(codex) == EVENTS
    assert all(len(groups) == 1 for groups in [*claude.values(), *codex.values()])
    assert claude["PreToolUse"][0]["matcher"] == "Write|Edit|MultiEdit|NotebookEdit"
    assert codex["PreToolUse"][0]["matcher"] == "apply_patch|Edit|Write"
    assert "matcher" not in claude["Stop"][0] and "matcher" not in codex["SessionStart"][0]
    assert claude["Stop"][0]["hooks"] == [{"type": "command", "command": "eventcoord hook claude", "timeout": 10}]
    assert load(repo, ".mcp.json") == {
        "mcpServers": {"eventcoord": {"type": "stdio", "command": "eventcoord", "args": ["mcp"]}}
    }
    for name in ("pre-commit", "pre-push"):
        hook = repo / ".git" / "hooks" / name
        assert os.access(hook, os.X_OK)
        text = hook.read_text()
        assert text.startswith("#!/bin/sh\n# >>> eventcoord >>>") and f"eventcoord hook {name}" in text

    out = " ".join(done.stdout.split())
    for name in FILES:
        assert f"created {name}" in out
    assert "SILENTLY" in out and "Trust all and continue" in out  # Codex skips untrusted hooks without a word
    assert "EVENTCOORD_URL" in out and "--remove" in out
    assert f"here that is {VENV_BIN}/eventcoord" in out


def test_a_second_run_changes_nothing(repo: Path) -> None:
    assert init(repo).returncode == 0
    first = snapshot(repo)
    again = init(repo)
    assert again.returncode == 0, again.stderr
    assert snapshot(repo) == first
    assert again.stdout.count("unchanged") == len(FILES)


def test_init_warns_when_the_harness_will_not_find_eventcoord(repo: Path) -> None:
    done = init(repo, path="/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    assert "WARNING: `eventcoord` is not on PATH" in " ".join(done.stdout.split())


USER_SETTINGS = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "env": {"FOO": "bar"},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./scripts/guard.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "say hi"}]}],
    },
}
USER_CODEX_HOOKS = {
    "hooks": {
        "SessionStart": [{"matcher": "startup|resume", "hooks": [{"type": "command", "command": "sh .codex/s.sh"}]}],
        "PreToolUse": [{"matcher": "^Bash$", "hooks": [{"type": "command", "command": "python3 p.py"}]}],
    }
}
USER_MCP = {"mcpServers": {"github": {"command": "gh-mcp", "args": ["--stdio"], "env": {"GH": "1"}}}}
USER_PRE_COMMIT = "#!/usr/bin/env bash\nset -e\n# the team's checks\nnpm run lint\nexec lint-staged\n"
USER_PRE_PUSH = "#!/bin/sh\nwhile read local_ref local_sha remote_ref remote_sha; do echo $remote_ref; done\n"


def write_user_setup(repo: Path) -> dict[str, bytes | None]:
    (repo / ".claude").mkdir()
    (repo / ".codex").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=4) + "\n")
    (repo / ".codex" / "hooks.json").write_text(json.dumps(USER_CODEX_HOOKS, indent=2) + "\n")
    (repo / ".mcp.json").write_text(json.dumps(USER_MCP, indent=2) + "\n")
    for name, text in (("pre-commit", USER_PRE_COMMIT), ("pre-push", USER_PRE_PUSH)):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(text)
        hook.chmod(0o755)
    return snapshot(repo)


def test_init_keeps_everything_the_user_already_had(repo: Path) -> None:
    write_user_setup(repo)
    done = init(repo)
    assert done.returncode == 0, done.stderr
    assert all(f"updated   {name}" in done.stdout for name in FILES)

    settings = load(repo, ".claude/settings.json")
    assert settings["permissions"] == USER_SETTINGS["permissions"] and settings["env"] == USER_SETTINGS["env"]
    user_hooks = USER_SETTINGS["hooks"]
    assert isinstance(user_hooks, dict)
    # The user's groups stay first, in their place (Codex keys its hook trust by position).
    assert settings["hooks"]["PreToolUse"][0] == user_hooks["PreToolUse"][0]
    assert settings["hooks"]["Stop"][0] == user_hooks["Stop"][0]
    assert settings["hooks"]["Notification"] == user_hooks["Notification"]
    assert [len(g) for g in own_groups(settings, "claude").values()].count(1) == len(EVENTS)
    assert (repo / ".claude" / "settings.json").read_text().startswith('{\n    "permissions"')  # its indent kept

    codex = load(repo, ".codex/hooks.json")
    assert codex["hooks"]["SessionStart"][0] == USER_CODEX_HOOKS["hooks"]["SessionStart"][0]
    assert codex["hooks"]["PreToolUse"][0] == USER_CODEX_HOOKS["hooks"]["PreToolUse"][0]
    assert [len(g) for g in own_groups(codex, "codex").values()].count(1) == len(EVENTS)

    servers = load(repo, ".mcp.json")["mcpServers"]
    assert servers["github"] == USER_MCP["mcpServers"]["github"] and "eventcoord" in servers

    pre_commit = (repo / ".git" / "hooks" / "pre-commit").read_text()
    assert pre_commit.startswith("#!/usr/bin/env bash\n# >>> eventcoord >>>")  # before the user's `exec`
    assert pre_commit.endswith("# <<< eventcoord <<<\n" + USER_PRE_COMMIT.split("\n", 1)[1])
    pre_push = (repo / ".git" / "hooks" / "pre-push").read_text()
    assert pre_push.endswith(USER_PRE_PUSH.split("\n", 1)[1]) and "eventcoord hook pre-push" in pre_push

    first = snapshot(repo)
    assert init(repo).returncode == 0
    assert snapshot(repo) == first


def test_remove_takes_out_exactly_its_own_entries(repo: Path) -> None:
    before = write_user_setup(repo)
    assert init(repo).returncode == 0
    done = init(repo, "--remove")
    assert done.returncode == 0, done.stderr
    assert snapshot(repo) == before  # byte for byte: the user's files as they were
    again = init(repo, "--remove")
    assert again.returncode == 0 and snapshot(repo) == before


def test_remove_deletes_the_files_it_made_and_nothing_else(repo: Path) -> None:
    (repo / "notes.txt").write_text("mine\n")
    assert init(repo).returncode == 0
    done = init(repo, "--remove")
    assert done.returncode == 0, done.stderr
    assert snapshot(repo) == dict.fromkeys(FILES)
    assert not (repo / ".claude").exists() and not (repo / ".codex").exists()
    assert (repo / "notes.txt").read_text() == "mine\n"
    assert all(f"deleted   {name}" in done.stdout for name in FILES)


def test_check_names_what_is_missing(repo: Path) -> None:
    missing = init(repo, "--check")
    assert missing.returncode == 1
    assert snapshot(repo) == dict.fromkeys(FILES)  # --check writes nothing
    for name in FILES:
        assert name in missing.stdout
    assert ".claude/settings.json: the PreToolUse hook" in missing.stdout

    assert init(repo).returncode == 0
    complete = init(repo, "--check")
    assert complete.returncode == 0 and "everything is in place" in complete.stdout

    settings = load(repo, ".claude/settings.json")
    del settings["hooks"]["Stop"]
    (repo / ".claude" / "settings.json").write_text(json.dumps(settings))
    (repo / ".git" / "hooks" / "pre-push").unlink()
    partial = init(repo, "--check")
    assert partial.returncode == 1
    lines = [line.strip() for line in partial.stdout.splitlines()]
    assert ".claude/settings.json: the Stop hook (`eventcoord hook claude`)" in lines
    assert f"{repo / '.git' / 'hooks' / 'pre-push'}: eventcoord's pre-push gate" in lines
    assert not any(line.startswith((".codex", ".mcp.json")) or "pre-commit" in line for line in lines)


def test_an_absolute_executable_is_still_recognised_as_its_own(repo: Path) -> None:
    assert init(repo, "--executable", f"{VENV_BIN}/eventcoord").returncode == 0
    stop = load(repo, ".claude/settings.json")["hooks"]["Stop"]
    assert stop == [{"hooks": [{"type": "command", "command": f"{VENV_BIN}/eventcoord hook claude", "timeout": 10}]}]
    assert init(repo).returncode == 0  # back to the shareable bare name: replaced, not doubled
    stop = load(repo, ".claude/settings.json")["hooks"]["Stop"]
    assert stop == [{"hooks": [{"type": "command", "command": "eventcoord hook claude", "timeout": 10}]}]


LEGACY_PRE_PUSH = (
    "#!/bin/sh\n# eventcoord pre-push hook (written by `eventcoord hook install`): the publish gate.\n"
    'exec eventcoord hook pre-push "$@"\n'
)


def test_a_whole_file_pre_push_hook_of_an_older_eventcoord_is_taken_over(repo: Path) -> None:
    (repo / ".git" / "hooks" / "pre-push").write_text(LEGACY_PRE_PUSH)
    assert init(repo).returncode == 0
    pre_push = (repo / ".git" / "hooks" / "pre-push").read_text()
    assert "exec eventcoord" not in pre_push and pre_push.count("# >>> eventcoord >>>") == 1


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        (".claude/settings.json", '{"hooks": {', ".claude/settings.json: not valid JSON"),
        (".codex/hooks.json", '{"hooks": []}', "`hooks` is an array, not a JSON object"),
        (".mcp.json", "[1, 2]", ".mcp.json: holds an array, not a JSON object"),
        (".claude/settings.json", '{"hooks": {"Stop": {}}}', "`hooks.Stop` is an object, not a JSON array"),
        (".git/hooks/pre-commit", "#!/usr/bin/env python3\nprint('hi')\n", "is a python3 script"),
    ],
)
def test_a_file_it_cannot_merge_stops_it_before_anything_is_written(
    repo: Path, name: str, text: str, words: str
) -> None:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(text)
    before = snapshot(repo)
    done = init(repo)
    assert done.returncode == 2
    assert words in done.stderr and "nothing was written" in done.stderr
    assert snapshot(repo) == before


def test_outside_a_git_repository_it_refuses(tmp_path: Path) -> None:
    done = init(tmp_path)
    assert done.returncode == 2
    assert "not inside a git repository" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_in_a_subdirectory_it_sets_up_the_whole_work_tree(repo: Path) -> None:
    (repo / "src" / "pkg").mkdir(parents=True)
    assert init(repo / "src" / "pkg").returncode == 0
    assert (repo / ".claude" / "settings.json").exists() and not (repo / "src" / "pkg" / ".claude").exists()


def test_a_git_hook_it_merges_into_is_made_executable(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(USER_PRE_COMMIT)
    hook.chmod(0o644)
    assert init(repo).returncode == 0
    assert os.access(hook, os.X_OK)
    hook.chmod(0o644)
    check = init(repo, "--check")
    assert check.returncode == 1 and f"{hook}: not executable" in check.stdout
    again = init(repo)
    assert "updated   .git/hooks/pre-commit" in again.stdout and os.access(hook, os.X_OK)
