"""What the real harnesses hand a hook: every event eventcoord relies on fires, with the fields it reads.

A recording hook (``cat`` into a file) stands where ``eventcoord hook`` goes, so a
harness release that renames a field or drops an event fails here, named, before
the end-to-end tests fail for a less obvious reason.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from tests.harness.harnesses import ClaudeCode, Codex
from tests.harness.model_servers import Answer, MessagesServer, ResponsesServer, ToolCall

EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"]


def recording_hooks(out: Path, matcher: str) -> dict[str, Any]:
    hook = {"type": "command", "command": f"cat >> {shlex.quote(str(out))}; echo >> {shlex.quote(str(out))}"}
    return {"hooks": {e: [{**({"matcher": matcher} if e == "PreToolUse" else {}), "hooks": [hook]}] for e in EVENTS}}


def recorded(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def test_claude_code_hands_hooks_the_fields_we_read(claude: ClaudeCode, repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "payloads.jsonl"
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(
        json.dumps(recording_hooks(out, "Write|Edit|MultiEdit|NotebookEdit"))
    )
    model = MessagesServer([ToolCall("Write", {"file_path": str(repo / "a.txt"), "content": "a\n"}), Answer("wrote a")])
    try:
        run = claude.run(repo, model, "write a")
    finally:
        model.close()
    assert run.returncode == 0, run.explain()
    payloads = recorded(out)
    assert [p["hook_event_name"] for p in payloads] == EVENTS, payloads
    assert {p["session_id"] for p in payloads} == {run.session_id}
    assert {p["cwd"] for p in payloads} == {str(repo)}
    by_event = {p["hook_event_name"]: p for p in payloads}
    assert by_event["SessionStart"]["source"] == "startup"
    assert by_event["PreToolUse"]["tool_name"] == "Write"
    assert by_event["PreToolUse"]["tool_input"]["file_path"] == str(repo / "a.txt")
    assert by_event["Stop"]["last_assistant_message"] == "wrote a"
    assert "reason" in by_event["SessionEnd"]


def test_codex_hands_hooks_the_fields_we_read(codex: Codex, repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "payloads.jsonl"
    (repo / ".codex").mkdir()
    (repo / ".codex" / "hooks.json").write_text(json.dumps(recording_hooks(out, "apply_patch|Edit|Write")))
    patch = f"*** Begin Patch\n*** Add File: {repo / 'a.txt'}\n+a\n*** Add File: b.txt\n+b\n*** End Patch\n"
    model = ResponsesServer([ToolCall("apply_patch", patch), Answer("wrote a and b")])
    try:
        run = codex.run(repo, model, "write a and b")
    finally:
        model.close()
    assert run.returncode == 0, run.explain()
    payloads = recorded(out)
    assert [p["hook_event_name"] for p in payloads] == EVENTS, payloads
    assert {p["session_id"] for p in payloads} == {run.session_id}
    assert {p["cwd"] for p in payloads} == {str(repo)}
    by_event = {p["hook_event_name"]: p for p in payloads}
    assert by_event["PreToolUse"]["tool_name"] == "apply_patch"
    assert by_event["PreToolUse"]["tool_input"]["command"] == patch
    assert by_event["Stop"]["last_assistant_message"] == "wrote a and b"
    assert (repo / "a.txt").read_text() == "a\n" and (repo / "b.txt").read_text() == "b\n"


def test_codex_skips_untrusted_project_hooks_silently(codex: Codex, repo: Path, tmp_path: Path) -> None:
    """Why ``eventcoord init`` tells the user to trust the hooks: without it nothing says they did not run."""
    out = tmp_path / "payloads.jsonl"
    (repo / ".codex").mkdir()
    (repo / ".codex" / "hooks.json").write_text(json.dumps(recording_hooks(out, "apply_patch|Edit|Write")))
    model = ResponsesServer([ToolCall("apply_patch", "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n")])
    try:
        run = codex.run(repo, model, "write a", trust_hooks=False)
    finally:
        model.close()
    assert run.returncode == 0, run.explain()
    assert (repo / "a.txt").exists()
    assert not out.exists()
    assert "hook" not in (run.stdout + run.stderr).lower()
