"""Claude Code, for real, in a repository set up by ``eventcoord init``, against a real server.

The model (a scripted stand-in) asks to edit a file another live session holds, then to
write a free one: the first write never happens and the model is told why, naming the holder; the
second is made and claimed by the harness's own eventcoord session, which ends, releasing
it with the model's last words as its handoff note, when Claude Code exits.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.harness.conftest import ORIGINAL, claims_reader, harness_sessions, runtime_digest
from tests.harness.harnesses import ClaudeCode
from tests.harness.model_servers import WAIT_FOR_MCP, Answer, AwaitTools, MessagesServer, ToolCall
from tests.helpers import Api, ServerProcess

LAST_WORDS = "Wrote notes/plan.md; src/app.py is alice's (APP-1), so I left it alone."


async def test_a_write_to_a_held_file_is_stopped_and_a_free_one_is_claimed(
    claude: ClaudeCode,
    coordinated: Path,
    api: Api,
    server: ServerProcess,
    holder: str,
    agent_env: dict[str, str],
) -> None:
    held, free = coordinated / "src" / "app.py", coordinated / "notes" / "plan.md"
    edit = {"file_path": str(held), "old_string": "alice is rewriting this", "new_string": "mine now"}
    script = [
        ToolCall("Read", {"file_path": str(held)}),  # Claude Code edits only a file it has read
        ToolCall("Edit", edit),
        ToolCall("Write", {"file_path": str(free), "content": "# plan\n"}),
        Answer(LAST_WORDS),
    ]
    with MessagesServer(script, observe=claims_reader(server, agent_env)) as model:
        run = claude.run(coordinated, model, "tidy up the app", env=agent_env)
    assert run.returncode == 0, run.explain()
    assert run.session_id

    # Before its first word the model was told who else is here and what they hold.
    first = json.dumps(model.model_requests()[0])
    assert "alice" in first and "src/app.py" in first

    # The held file was never written; the model was told why, naming path, holder and issue.
    assert held.read_text() == ORIGINAL
    read, denied, made = model.tool_results()
    assert not read.get("is_error"), read
    assert denied["is_error"] is True
    reason = str(denied["content"])
    assert "src/app.py" in reason and "alice" in reason and "APP-1" in reason, reason
    assert not made.get("is_error"), made
    assert free.read_text() == "# plan\n"

    # One eventcoord session for the harness session: runtime claude, keyed by its session id.
    sessions = await harness_sessions(api, "claude")
    assert len(sessions) == 1, sessions
    session = sessions[0]
    assert session["actor_key"].startswith(f"claude:thread-{runtime_digest(run.session_id)}:")
    registered = [e for e in await api.events("AgentRegistered") if e["data"]["session_id"] == session["session_id"]]
    assert registered[0]["data"]["runtime"] == "claude"

    # While Claude Code ran (asked for its last answer), the free file was claimed by it.
    while_running = model.observations[-1]
    mine = [c for c in while_running if c["session_id"] == session["session_id"]]
    assert [c["path"] for c in mine] == ["notes/plan.md"], while_running
    assert mine[0]["exclusive"] is True
    assert [c["path"] for c in while_running if c["session_id"] == holder] == ["src/app.py"]

    # Claude Code has exited: its session ended with the last answer as the handoff note,
    # and released what it held; alice still holds hers.
    assert session["live"] is False and session["ended_at"] is not None
    ended = [e for e in await api.events("AgentEnded") if e["data"]["session_id"] == session["session_id"]]
    assert ended[0]["data"]["handoff_note"] == LAST_WORDS
    claims = (await api.get("/v1/file-claims"))["file_claims"]
    assert [(c["path"], c["session_id"]) for c in claims] == [("src/app.py", holder)]


@pytest.mark.sqlite  # the MCP set-up, not the store, is under test here
async def test_claude_code_gets_eventcoord_tools_from_the_mcp_json_init_wrote(
    claude: ClaudeCode, coordinated: Path, holder: str, agent_env: dict[str, str]
) -> None:
    tools = ("mcp__eventcoord__list_file_claims", "mcp__eventcoord__claim_files")
    script = [
        # Claude Code connects MCP servers beside the first request: it may offer them at
        # once or offer WaitForMcpServers until they are connected.
        AwaitTools(tools),
        ToolCall("mcp__eventcoord__list_file_claims", {}),
        Answer("alice holds src/app.py"),
    ]
    with MessagesServer(script) as model:
        # -p asks before an MCP tool as it does before any tool outside --permission-mode.
        allowed = ("mcp__eventcoord__list_file_claims",)
        run = claude.run(coordinated, model, "who holds what?", env=agent_env, mcp=True, allowed_tools=allowed)
    assert run.returncode == 0, run.explain()
    assert model.calls[-1] == "mcp__eventcoord__list_file_claims", model.calls
    *waited, claims = model.tool_results()
    assert len(waited) == model.calls.count(WAIT_FOR_MCP)
    if waited:  # the wait ended with the servers connected
        assert str(waited[-1]["content"]).startswith("ready: true"), waited
    offered = [t["name"] for t in model.model_requests()[-1]["tools"]]
    assert set(tools) <= set(offered), offered
    assert not claims.get("is_error") and "src/app.py" in str(claims["content"]), claims
    assert holder in str(claims["content"])


async def test_a_commit_the_agent_makes_is_its_own_and_a_held_file_still_stops_it(
    claude: ClaudeCode, coordinated: Path, api: Api, holder: str, agent_env: dict[str, str]
) -> None:
    """The pre-commit gate init installed, run by ``git commit`` in Claude Code's Bash tool: the
    committer is the session Claude Code's hooks are bound to (Claude Code tells its commands
    CLAUDE_CODE_SESSION_ID), even though git config names alice; so the file its hook claimed
    commits, and alice's file does not."""
    git = ["git", "-C", str(coordinated)]
    assert subprocess.run([*git, "config", "eventcoord.session", holder], check=False).returncode == 0
    commit_mine = "git add notes/mine.md && git commit -qm 'my notes' && echo COMMITTED"
    commit_theirs = "echo '# mine' >> src/app.py && git commit -qam 'take app'; echo EXIT=$?"
    script = [
        ToolCall("Write", {"file_path": str(coordinated / "notes" / "mine.md"), "content": "mine\n"}),
        ToolCall("Bash", {"command": commit_mine}),
        ToolCall("Bash", {"command": commit_theirs}),
        Answer("committed my notes; src/app.py is alice's"),
    ]
    who = {"GIT_AUTHOR_NAME": "agent", "GIT_AUTHOR_EMAIL": "agent@example.invalid"}
    env = {**agent_env, **who, "GIT_COMMITTER_NAME": "agent", "GIT_COMMITTER_EMAIL": "agent@example.invalid"}
    with MessagesServer(script) as model:
        run = claude.run(coordinated, model, "commit your notes", env=env, allowed_tools=("Bash",))
    assert run.returncode == 0, run.explain()
    written, mine, theirs = model.tool_results()
    assert not written.get("is_error"), written
    assert "COMMITTED" in str(mine["content"]), mine
    assert "EXIT=1" in str(theirs["content"]) and f"src/app.py: held by alice (session {holder})" in str(
        theirs["content"]
    ), theirs
    log = subprocess.run([*git, "log", "--format=%s"], capture_output=True, text=True, check=True).stdout.split("\n")
    assert log[:2] == ["my notes", "first"], log
