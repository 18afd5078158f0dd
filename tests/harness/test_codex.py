"""Codex, for real, in a repository set up by ``eventcoord init``, against a real server.

Codex writes files with ``apply_patch``, one patch for several paths. A patch that touches
a file another live session holds is refused whole (its free paths are neither written
nor claimed) and the model is told why; a patch of free paths is applied and all of them
are claimed by Codex's own eventcoord session, which ends when Codex exits.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.harness.conftest import ORIGINAL, claims_reader, harness_sessions, runtime_digest
from tests.harness.harnesses import Codex
from tests.harness.model_servers import Answer, ResponsesServer, ToolCall
from tests.helpers import Api, ServerProcess

LAST_WORDS = "Added docs/a.md and docs/b.md; src/app.py is alice's, so the first patch was dropped."


def patch(*sections: str) -> str:
    return "*** Begin Patch\n" + "".join(sections) + "*** End Patch\n"


async def test_a_patch_touching_a_held_file_is_refused_whole_and_a_free_one_claimed(
    codex: Codex,
    coordinated: Path,
    api: Api,
    server: ServerProcess,
    holder: str,
    agent_env: dict[str, str],
) -> None:
    repo = coordinated
    refused = patch(
        "*** Add File: docs/new.md\n+new\n",
        f"*** Update File: {repo / 'src' / 'app.py'}\n@@\n-    print('alice is rewriting this')\n+    print('mine')\n",
    )
    # One path relative to the working directory, one absolute: both are the repository's.
    applied = patch("*** Add File: docs/a.md\n+a\n", f"*** Add File: {repo / 'docs' / 'b.md'}\n+b\n")
    script = [ToolCall("apply_patch", refused), ToolCall("apply_patch", applied), Answer(LAST_WORDS)]
    with ResponsesServer(script, observe=claims_reader(server, agent_env)) as model:
        run = codex.run(repo, model, "document the app", env=agent_env)
    assert run.returncode == 0, run.explain()
    assert run.session_id

    # Before its first word the model was told who else is here and what they hold.
    first = json.dumps(model.model_requests()[0])
    assert "alice" in first and "src/app.py" in first

    # All or nothing: neither path of the refused patch was written; the model heard why.
    assert (repo / "src" / "app.py").read_text() == ORIGINAL
    assert not (repo / "docs" / "new.md").exists()
    blocked, done = model.tool_outputs()
    told = str(blocked["output"])
    assert told.startswith("Command blocked by PreToolUse hook:"), told
    assert "src/app.py" in told and "alice" in told and "APP-1" in told, told
    assert "Success" in str(done["output"]), done
    assert (repo / "docs" / "a.md").read_text() == "a\n" and (repo / "docs" / "b.md").read_text() == "b\n"

    sessions = await harness_sessions(api, "codex")
    assert len(sessions) == 1, sessions
    session = sessions[0]
    assert session["actor_key"].startswith(f"codex:thread-{runtime_digest(run.session_id)}:")
    registered = [e for e in await api.events("AgentRegistered") if e["data"]["session_id"] == session["session_id"]]
    assert registered[0]["data"]["runtime"] == "codex"

    # The refused patch claimed nothing; the applied one claimed both its paths, in one go.
    claimed = [e["data"] for e in await api.events("FilesClaimed") if e["data"]["session_id"] == session["session_id"]]
    assert [sorted(c["paths"]) for c in claimed] == [["docs/a.md", "docs/b.md"]], claimed
    while_running = model.observations[-1]
    mine = sorted(c["path"] for c in while_running if c["session_id"] == session["session_id"])
    assert mine == ["docs/a.md", "docs/b.md"], while_running

    # Codex has exited: the session ended, with its last answer as the handoff note.
    assert session["live"] is False and session["ended_at"] is not None
    ended = [e for e in await api.events("AgentEnded") if e["data"]["session_id"] == session["session_id"]]
    assert ended[0]["data"]["handoff_note"] == LAST_WORDS
    claims = (await api.get("/v1/file-claims"))["file_claims"]
    assert [(c["path"], c["session_id"]) for c in claims] == [("src/app.py", holder)]


async def test_a_commit_codex_makes_is_its_own_and_a_held_file_still_stops_it(
    codex: Codex, coordinated: Path, api: Api, holder: str, agent_env: dict[str, str]
) -> None:
    """``git commit`` from Codex's ``exec_command`` (with full access: its default sandbox keeps
    ``.git`` read-only and the network off): the committer is the session Codex's hooks are
    bound to (CODEX_THREAD_ID), though git config names alice."""
    repo = coordinated
    git = ["git", "-C", str(repo)]
    assert subprocess.run([*git, "config", "eventcoord.session", holder], check=False).returncode == 0
    who = "-c user.name=agent -c user.email=agent@example.invalid"
    script = [
        ToolCall("apply_patch", patch("*** Add File: notes/mine.md\n+mine\n")),
        ToolCall(
            "exec_command", {"cmd": f"git add notes/mine.md && git {who} commit -qm 'my notes' && echo COMMITTED"}
        ),
        ToolCall("exec_command", {"cmd": f"echo x >> src/app.py && git {who} commit -qam 'take app'; echo EXIT=$?"}),
        Answer("committed my notes; src/app.py is alice's"),
    ]
    with ResponsesServer(script) as model:
        run = codex.run(repo, model, "commit your notes", env=agent_env, sandbox="danger-full-access")
    assert run.returncode == 0, run.explain()
    _patch, mine, theirs = (str(o.get("output")) for o in model.tool_outputs())
    assert "COMMITTED" in mine, mine
    assert "EXIT=1" in theirs and f"src/app.py: held by alice (session {holder})" in theirs, theirs
    log = subprocess.run([*git, "log", "--format=%s"], capture_output=True, text=True, check=True).stdout.split("\n")
    assert log[:2] == ["my notes", "first"], log
