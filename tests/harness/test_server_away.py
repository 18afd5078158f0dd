"""The real harnesses with the eventcoord server away: the agent goes on (fail-open), unless told not to.

``EVENTCOORD_URL`` names a port nobody listens on. By default every hook lets the harness
go on and the edit is made; with ``EVENTCOORD_HOOK_FAIL=closed`` a file-writing tool call
is refused and the model is told why, while the session itself still runs to its end.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.harness.harnesses import ClaudeCode, Codex
from tests.harness.model_servers import Answer, MessagesServer, ResponsesServer, ToolCall
from tests.helpers import free_port


@pytest.fixture
def away() -> dict[str, str]:
    return {"EVENTCOORD_URL": f"http://127.0.0.1:{free_port()}", "EVENTCOORD_TOKEN": "nobody-checks-it"}


def test_claude_code_edits_on_when_the_server_is_away(
    claude: ClaudeCode, coordinated: Path, away: dict[str, str]
) -> None:
    script = [ToolCall("Write", {"file_path": str(coordinated / "notes.md"), "content": "n\n"}), Answer("wrote it")]
    with MessagesServer(script) as model:
        run = claude.run(coordinated, model, "take notes", env=away)
    assert run.returncode == 0, run.explain()
    (result,) = model.tool_results()
    assert not result.get("is_error"), result
    assert (coordinated / "notes.md").read_text() == "n\n"


def test_claude_code_is_stopped_when_the_server_is_away_and_the_hook_fails_closed(
    claude: ClaudeCode, coordinated: Path, away: dict[str, str]
) -> None:
    script = [ToolCall("Write", {"file_path": str(coordinated / "notes.md"), "content": "n\n"}), Answer("gave up")]
    with MessagesServer(script) as model:
        run = claude.run(coordinated, model, "take notes", env={**away, "EVENTCOORD_HOOK_FAIL": "closed"})
    assert run.returncode == 0, run.explain()
    (result,) = model.tool_results()
    assert result["is_error"] is True
    assert "coordination is unavailable" in str(result["content"]) and away["EVENTCOORD_URL"] in str(result["content"])
    assert not (coordinated / "notes.md").exists()


def test_codex_patches_on_when_the_server_is_away(codex: Codex, coordinated: Path, away: dict[str, str]) -> None:
    patch = "*** Begin Patch\n*** Add File: notes.md\n+n\n*** End Patch\n"
    with ResponsesServer([ToolCall("apply_patch", patch), Answer("wrote it")]) as model:
        run = codex.run(coordinated, model, "take notes", env=away)
    assert run.returncode == 0, run.explain()
    (output,) = model.tool_outputs()
    assert "Success" in str(output["output"]), output
    assert (coordinated / "notes.md").read_text() == "n\n"


def test_codex_is_stopped_when_the_server_is_away_and_the_hook_fails_closed(
    codex: Codex, coordinated: Path, away: dict[str, str]
) -> None:
    patch = "*** Begin Patch\n*** Add File: notes.md\n+n\n*** End Patch\n"
    with ResponsesServer([ToolCall("apply_patch", patch), Answer("gave up")]) as model:
        run = codex.run(coordinated, model, "take notes", env={**away, "EVENTCOORD_HOOK_FAIL": "closed"})
    assert run.returncode == 0, run.explain()
    (output,) = model.tool_outputs()
    told = str(output["output"])
    assert told.startswith("Command blocked by PreToolUse hook:") and "coordination is unavailable" in told, told
    assert not (coordinated / "notes.md").exists()
