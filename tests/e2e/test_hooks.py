"""The hook route of coding-agent harnesses (Claude Code, Codex) over HTTP against real servers.

Every payload is shaped as the real harnesses send it (``shared/reference/harnesses.md``:
recorded from ``@anthropic-ai/claude-code`` 2.1.197 and ``@openai/codex`` 0.171.0), and
every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import re
import time
from collections.abc import Callable
from typing import Any

import httpx
from tests.helpers import Api, ServerProcess, advance_clock

from eventcoord.codec import parse_time
from eventcoord.store.postgres.writer import CHAIN_FRESH_S

CWD = "/home/dev/proj"


def claude(event: str, sid: str, **fields: Any) -> dict[str, Any]:
    """A Claude Code hook payload."""
    body: dict[str, Any] = {
        "session_id": sid,
        "transcript_path": f"/home/dev/.claude/projects/-home-dev-proj/{sid[:40]}.jsonl",
        "cwd": CWD,
        "hook_event_name": event,
    }
    if event == "SessionStart":
        body["source"] = "startup"
    elif event != "SessionEnd":
        body |= {"prompt_id": "e54b9f1c", "permission_mode": "acceptEdits"}
    return body | fields


def claude_write(sid: str, path: str, tool: str = "Write") -> dict[str, Any]:
    """A Claude Code PreToolUse of a writing tool."""
    if tool == "NotebookEdit":
        tool_input: dict[str, Any] = {"notebook_path": path, "new_source": "x = 1"}
    elif tool == "MultiEdit":
        tool_input = {"file_path": path, "edits": [{"old_string": "a", "new_string": "b"}]}
    elif tool == "Edit":
        tool_input = {"file_path": path, "old_string": "a", "new_string": "b"}
    else:
        tool_input = {"file_path": path, "content": "hello"}
    return claude(
        "PreToolUse", sid, effort={"level": "high"}, tool_name=tool, tool_input=tool_input, tool_use_id="toolu_3"
    )


def codex(event: str, sid: str, **fields: Any) -> dict[str, Any]:
    """A Codex hook payload."""
    body: dict[str, Any] = {
        "session_id": sid,
        "turn_id": "01a2b3c4",
        "transcript_path": "/home/dev/.codex/sessions/2026/12/07/rollout-2026-12-07.jsonl",
        "cwd": CWD,
        "hook_event_name": event,
        "model": "gpt-5.5",
        "permission_mode": "bypassPermissions",
    }
    return body | fields


def codex_patch(sid: str, *lines: str) -> dict[str, Any]:
    """A Codex PreToolUse of ``apply_patch`` with the envelope around ``lines``."""
    patch = "*** Begin Patch\n" + "\n".join(lines) + "\n*** End Patch\n"
    return codex("PreToolUse", sid, tool_name="apply_patch", tool_input={"command": patch}, tool_use_id="call_3")


def actor_of(harness: str, harness_sid: str) -> str:
    """The actor key of a harness session's eventcoord sessions (the runtime identity of docs/protocol.md#identity)."""
    return f"{harness}:thread-{hashlib.sha256(('eventcoord:' + harness_sid).encode()).hexdigest()[:24]}:hook"


def context(answer: dict[str, Any]) -> str:
    out = answer["hookSpecificOutput"]
    assert set(out) == {"hookEventName", "additionalContext"}, answer
    text: str = out["additionalContext"]
    return text


def reason(answer: dict[str, Any]) -> str:
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny", answer
    assert set(out) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
    text: str = out["permissionDecisionReason"]
    return text


def session_in(text: str) -> str:
    m = re.search(r"this session is (?:now )?(s-[0-9a-f]+)", text)
    assert m, text
    return m.group(1)


class Hooks:
    """Sends hooks to one server as a harness's command form would."""

    def __init__(self, api: Api) -> None:
        self.api = api

    async def post(self, harness: str, payload: Any, **kw: Any) -> httpx.Response:
        return await self.api.http.post(f"/v1/hooks/{harness}", json=payload, **kw)

    async def send(self, harness: str, payload: dict[str, Any]) -> dict[str, Any]:
        r = await self.post(harness, payload)
        assert r.status_code == 200, r.text
        answer: dict[str, Any] = r.json()
        assert "allow" not in r.text, r.text  # never permissionDecision: allow
        return answer

    async def refused(self, harness: str, payload: Any, status: int, code: str, **kw: Any) -> dict[str, Any]:
        r = await self.post(harness, payload, **kw)
        assert r.status_code == status, r.text
        err: dict[str, Any] = r.json()["error"]
        assert err["code"] == code, r.text
        return err


async def sessions_of(api: Api, harness: str, harness_sid: str) -> list[dict[str, Any]]:
    """The eventcoord sessions of a harness session, oldest first."""
    agents = (await api.get("/v1/agents", limit=10000))["agents"]
    return [a for a in reversed(agents) if a["actor_key"] == actor_of(harness, harness_sid)]


async def claims(api: Api) -> set[tuple[str, str, str | None]]:
    """Live file claims as (path, issue, session)."""
    return {(r["path"], r["issue"], r["session_id"]) for r in (await api.get("/v1/file-claims"))["file_claims"]}


async def test_a_claude_session_from_start_to_end(api: Api) -> None:
    hooks = Hooks(api)
    sid = "eb58c0de-1111-4000-8000-000000000001"
    start = await hooks.send("claude", claude("SessionStart", sid))
    me = session_in(context(start))
    assert "No other live session" in context(start)
    [agent] = await sessions_of(api, "claude", sid)
    assert agent["session_id"] == me and agent["live"] and agent["runtime"] == "claude"
    assert agent["identity_source"] == "runtime-session-id:claude" and agent["stable"]

    assert await hooks.send("claude", claude("UserPromptSubmit", sid, prompt="write hello")) == {}
    assert await hooks.send("claude", claude_write(sid, f"{CWD}/hello.txt")) == {}
    assert await hooks.send("claude", claude_write(sid, f"{CWD}/src/a.py", "MultiEdit")) == {}
    assert await hooks.send("claude", claude_write(sid, f"{CWD}/nb/x.ipynb", "NotebookEdit")) == {}
    edit = f"edit:{me}"
    assert await claims(api) == {("hello.txt", edit, me), ("src/a.py", edit, me), ("nb/x.ipynb", edit, me)}
    post = claude(
        "PostToolUse",
        sid,
        tool_name="Write",
        tool_input={"file_path": f"{CWD}/hello.txt", "content": "hello"},
        tool_response={"type": "create", "filePath": f"{CWD}/hello.txt"},
        duration_ms=3,
    )
    assert await hooks.send("claude", post) == {}
    # Editing a file it holds again writes nothing at all.
    head = await api.head()
    assert await hooks.send("claude", claude_write(sid, f"{CWD}/hello.txt", "Edit")) == {}
    assert await api.head() == head

    stop = claude("Stop", sid, stop_hook_active=False, last_assistant_message="done: hello.txt written")
    assert await hooks.send("claude", stop | {"background_tasks": [], "session_crons": []}) == {}
    assert await hooks.send("claude", claude("SessionEnd", sid, reason="other")) == {}
    [ended] = await api.events("AgentEnded")
    assert ended["data"] == {"session_id": me, "handoff_note": "done: hello.txt written"}
    assert await claims(api) == set()
    [agent] = await sessions_of(api, "claude", sid)
    assert agent["ended_at"] is not None
    # A second SessionEnd (the harness retrying) changes nothing.
    head = await api.head()
    assert await hooks.send("claude", claude("SessionEnd", sid, reason="other")) == {}
    assert await api.head() == head


async def test_a_write_to_a_file_another_session_holds_is_denied_naming_path_holder_and_issue(api: Api) -> None:
    hooks = Hooks(api)
    alice = await api.register(actor="alice")
    await api.ok({"type": "claim_issue", "session_id": alice, "project": "P", "issue": "P-1"})
    await api.ok({"type": "claim_files", "session_id": alice, "issue": "P-1", "paths": ["src/app.py", "docs/"]})
    sid = "eb58c0de-2222-4000-8000-000000000002"
    me = session_in(context(await hooks.send("claude", claude("SessionStart", sid))))

    answer = await hooks.send("claude", claude_write(sid, f"{CWD}/src/app.py"))
    text = reason(answer)
    for part in ("src/app.py", "alice", alice, "issue P-1", "post-message", f"agent:{alice}", "claim-files", "--wait"):
        assert part in text, (part, text)
    text = reason(await hooks.send("claude", claude_write(sid, f"{CWD}/docs/guide.md", "Edit")))
    assert "docs/guide.md" in text and "claim docs/" in text and "alice" in text
    assert {c for c in await claims(api) if c[2] == me} == set()
    conflicts = await api.events("ClaimConflict")
    assert [(e["data"]["path"], e["data"]["holder_session_id"]) for e in conflicts] == [
        ("src/app.py", alice),
        ("docs/guide.md", alice),
    ]

    # A free file is claimed; under the session's own lease once it holds one.
    assert await hooks.send("claude", claude_write(sid, f"{CWD}/src/free.py")) == {}
    await api.ok({"type": "claim_issue", "session_id": me, "project": "P", "issue": "P-2"})
    await api.ok({"type": "claim_issue", "session_id": me, "project": "P", "issue": "P-3"})
    assert await hooks.send("claude", claude_write(sid, f"{CWD}/src/lib.py")) == {}
    assert {c for c in await claims(api) if c[2] == me} == {
        ("src/free.py", f"edit:{me}", me),
        ("src/lib.py", "P-3", me),
    }
    # Its own claims cover it, whatever the issue: nothing is written.
    head = await api.head()
    assert await hooks.send("claude", claude_write(sid, f"{CWD}/src/free.py", "Edit")) == {}
    assert await api.head() == head

    await api.ok({"type": "end_agent", "session_id": alice})
    assert await hooks.send("claude", claude_write(sid, f"{CWD}/src/app.py")) == {}
    assert ("src/app.py", "P-3", me) in await claims(api)


async def test_codex_apply_patch_claims_every_path_or_none(api: Api) -> None:
    hooks = Hooks(api)
    bob = await api.register(actor="bob")
    await api.ok({"type": "claim_files", "session_id": bob, "issue": "DOC-1", "paths": ["docs/guide.md"]})
    sid = "01a2b3c4-3333-7000-8000-000000000003"
    me = session_in(context(await hooks.send("codex", codex("SessionStart", sid, source="startup"))))
    patch = codex_patch(
        sid,
        f"*** Add File: {CWD}/src/new.py",
        "+print('new')",
        "*** Update File: src/old.py",
        "*** Move to: src/renamed.py",
        "@@",
        "-old",
        "+new",
        " *** Add File: src/not-a-header.py",
        "*** Delete File: docs/guide.md",
    )
    text = reason(await hooks.send("codex", patch))
    assert "docs/guide.md" in text and "bob" in text and "DOC-1" in text
    for path in ("src/new.py", "src/old.py", "src/renamed.py"):
        assert path not in text
    assert {c for c in await claims(api) if c[2] == me} == set()  # all or nothing

    await api.ok({"type": "end_agent", "session_id": bob})
    assert await hooks.send("codex", patch) == {}
    edit = f"edit:{me}"
    assert {c for c in await claims(api) if c[2] == me} == {
        (p, edit, me) for p in ("src/new.py", "src/old.py", "src/renamed.py", "docs/guide.md")
    }
    [claimed] = [e for e in await api.events("FilesClaimed") if e["data"]["session_id"] == me]
    assert claimed["data"]["paths"] == ["src/new.py", "src/old.py", "src/renamed.py", "docs/guide.md"]
    post = codex("PostToolUse", sid, tool_name="apply_patch", tool_input=patch["tool_input"], tool_response="Success.")
    assert await hooks.send("codex", post) == {}
    stop = codex("Stop", sid, stop_hook_active=False, last_assistant_message="patched")
    assert await hooks.send("codex", stop) == {}
    assert await hooks.send("codex", codex("SessionEnd", sid, reason="exit")) == {}
    assert (await api.events("AgentEnded"))[-1]["data"] == {"session_id": me, "handoff_note": "patched"}


async def test_paths_outside_the_working_tree_and_other_tools_are_never_claimed(api: Api) -> None:
    hooks = Hooks(api)
    sid = "eb58c0de-4444-4000-8000-000000000004"
    me = session_in(context(await hooks.send("claude", claude("SessionStart", sid))))
    for path in (
        "/etc/passwd",
        f"{CWD}/../escape.txt",
        f"{CWD}/src/../../escape.txt",
        "/home/dev/projother/a.txt",  # a sibling that shares the prefix
        CWD,
        f"{CWD}/",
        "../up.txt",
        "a\x00b.txt",
        f"{CWD}/bad\x00name",
        f"{CWD}/line\nbreak.txt",
        "",
    ):
        assert await hooks.send("claude", claude_write(sid, path)) == {}, path
    for tool, tool_input in (("Bash", {"command": "rm -rf src"}), ("Read", {"file_path": f"{CWD}/a.py"})):
        answer = await hooks.send("claude", claude("PreToolUse", sid, tool_name=tool, tool_input=tool_input))
        assert answer == {}
    patch = codex_patch("01a2-4444", "*** Add File: ../x.txt", "+x", "*** Delete File: /tmp/y.txt")
    assert await hooks.send("codex", patch) == {}
    assert await claims(api) == set()
    # A file whose name holds wildcard characters is claimed as that one file.
    assert await hooks.send("claude", claude_write(sid, f"{CWD}/src/[id]*.ts")) == {}
    assert await claims(api) == {(r"src/\[id\]\*.ts", f"edit:{me}", me)}
    other = "eb58c0de-4444-4000-8000-00000000000f"
    await hooks.send("claude", claude("SessionStart", other))
    assert await hooks.send("claude", claude_write(other, f"{CWD}/src/abc.ts")) == {}
    assert "src/[id]*.ts" in reason(await hooks.send("claude", claude_write(other, f"{CWD}/src/[id]*.ts")))


async def test_any_harness_session_id_is_one_session(api: Api) -> None:
    hooks = Hooks(api)
    odd = ["x" * 20000, "é🙂\n\t\x00 '; DROP TABLE sessions; --", " ", "../../etc/passwd", "%s%n{0}\\", "a" * 129]
    first: dict[str, str] = {}
    for sid in odd:
        first[sid] = session_in(context(await hooks.send("claude", claude("SessionStart", sid))))
        assert await hooks.send("claude", claude_write(sid, f"{CWD}/f{len(first)}.txt")) == {}
    assert len(set(first.values())) == len(odd)
    for sid in odd:
        again = session_in(context(await hooks.send("claude", claude("SessionStart", sid, source="resume"))))
        assert again == first[sid]
        assert [a["session_id"] for a in await sessions_of(api, "claude", sid)] == [first[sid]]
    # The same id from the other harness is another harness session.
    assert session_in(context(await hooks.send("codex", codex("SessionStart", odd[0])))) not in first.values()


async def test_resume_reuses_the_session_and_an_ended_one_is_renewed(api: Api) -> None:
    hooks = Hooks(api)
    sid = "eb58c0de-5555-4000-8000-000000000005"
    first = session_in(context(await hooks.send("claude", claude("SessionStart", sid))))
    for source in ("resume", "clear", "compact"):
        text = context(await hooks.send("claude", claude("SessionStart", sid, source=source)))
        assert session_in(text) == first
    await hooks.send("claude", claude_write(sid, f"{CWD}/a.txt"))
    await hooks.send("claude", claude("SessionEnd", sid, reason="other"))

    second = session_in(context(await hooks.send("claude", claude("SessionStart", sid, source="resume"))))
    assert second != first
    assert [(a["session_id"], a["live"]) for a in await sessions_of(api, "claude", sid)] == [
        (first, False),
        (second, True),
    ]
    await hooks.send("claude", claude("SessionEnd", sid, reason="other"))
    # A hook after the end, with no SessionStart, registers the next one and says so, once.
    text = context(await hooks.send("claude", claude("UserPromptSubmit", sid, prompt="go on")))
    third = session_in(text)
    assert third not in (first, second) and second in text
    assert await hooks.send("claude", claude("UserPromptSubmit", sid, prompt="and on")) == {}
    assert len(await sessions_of(api, "claude", sid)) == 3


async def test_a_stale_session_is_renewed_and_told_what_others_took(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    api = Api(start_server(ttl_seconds=2, test_clock=True).base_url)
    hooks = Hooks(api)
    try:
        sid = "eb58c0de-6666-4000-8000-000000000006"
        first = session_in(context(await hooks.send("claude", claude("SessionStart", sid))))
        for name in ("a.txt", "b.txt"):
            assert await hooks.send("claude", claude_write(sid, f"{CWD}/{name}")) == {}
        await advance_clock(db_url, 2.3)  # past the TTL: the session is stale
        alice = await api.register(actor="alice")
        await api.ok({"type": "claim_files", "session_id": alice, "issue": "A-1", "paths": ["b.txt"]})

        text = context(await hooks.send("claude", claude("UserPromptSubmit", sid, prompt="back")))
        second = session_in(text)
        assert second != first and first in text
        assert "b.txt" in text and f"reclaimed by session {alice}" in text and "a.txt" not in text
        # Its own earlier claim is reclaimed silently by the session it became, and not told.
        assert await hooks.send("claude", claude_write(sid, f"{CWD}/a.txt")) == {}
        assert await hooks.send("claude", claude("PostToolUse", sid, tool_name="Write")) == {}
        assert "alice" in reason(await hooks.send("claude", claude_write(sid, f"{CWD}/b.txt")))
        assert [a["session_id"] for a in await sessions_of(api, "claude", sid)] == [first, second]
    finally:
        await api.close()


async def test_messages_and_lost_holds_are_delivered_once(api: Api) -> None:
    hooks = Hooks(api)
    sid = "eb58c0de-7777-4000-8000-000000000007"
    me = session_in(context(await hooks.send("claude", claude("SessionStart", sid))))
    await hooks.send("claude", claude_write(sid, f"{CWD}/src/a.py"))
    await api.ok({"type": "claim_issue", "session_id": me, "project": "P", "issue": "P-1"})
    alice = await api.register(actor="alice")
    await api.ok({"type": "post_message", "session_id": alice, "channel": f"agent:{me}", "body": "leave b.py to me"})

    text = context(await hooks.send("claude", claude("UserPromptSubmit", sid, prompt="next")))
    assert "leave b.py to me" in text and "alice" in text
    assert await hooks.send("claude", claude("PostToolUse", sid, tool_name="Write")) == {}

    person = await api.client("human")
    try:
        carol = await person.register(actor="carol", kind="human")
        await person.ok(
            {"type": "claim_files", "session_id": carol, "issue": "H-1", "paths": ["src/a.py"], "force": True}
        )
        await person.ok({"type": "claim_issue", "session_id": carol, "project": "P", "issue": "P-1", "force": True})
    finally:
        await person.close()
    answer = await hooks.send("claude", claude("Stop", sid, stop_hook_active=False, last_assistant_message="ok"))
    text = context(answer)
    assert answer["hookSpecificOutput"]["hookEventName"] == "Stop"
    assert "overridden" in text and "src/a.py" in text and "carol" in text  # the force's own notice
    assert "lease on issue P-1 was taken over" in text and carol in text
    assert await hooks.send("claude", claude("Stop", sid, stop_hook_active=True, last_assistant_message="ok")) == {}
    assert await hooks.send("claude", claude("UserPromptSubmit", sid, prompt="again")) == {}
    # The write it lost is now refused, naming the person who took it.
    assert "carol" in reason(await hooks.send("claude", claude_write(sid, f"{CWD}/src/a.py")))


async def test_session_start_tells_who_else_is_here_what_waits_and_what_may_be_resumed(api: Api) -> None:
    hooks = Hooks(api)
    alice = await api.register(actor="alice")
    await api.ok({"type": "claim_issue", "session_id": alice, "project": "WEB", "issue": "WEB-7"})
    await api.ok({"type": "claim_files", "session_id": alice, "issue": "WEB-7", "paths": ["src/web/"]})
    codex_sid = "01a2b3c4-8888-7000-8000-000000000008"
    await hooks.send("codex", codex("SessionStart", codex_sid, source="startup"))
    await hooks.send("codex", codex_patch(codex_sid, "*** Add File: README.md", "+hi"))
    carol = await api.register(actor="carol")
    await api.ok({"type": "claim_issue", "session_id": carol, "project": "OLD", "issue": "OLD-1"})
    await api.ok({"type": "end_agent", "session_id": carol, "handoff_note": "tests pass; docs next"})

    sid = "eb58c0de-8888-4000-8000-000000000008"
    text = context(await hooks.send("claude", claude("SessionStart", sid)))
    me = session_in(text)
    for part in ("alice", "WEB-7", "src/web/", "[codex]", "README.md", "OLD-1", "tests pass; docs next"):
        assert part in text, (part, text)
    await api.ok({"type": "post_message", "session_id": alice, "channel": f"agent:{me}", "body": "welcome aboard"})
    text = context(await hooks.send("claude", claude("SessionStart", sid, source="resume")))
    assert "welcome aboard" in text and session_in(text) == me
    assert "welcome aboard" not in context(await hooks.send("claude", claude("SessionStart", sid, source="resume")))

    # However much there is to tell, it is at most 4,000 characters.
    for i in range(30):
        other = await api.register(actor=f"agent-{i:02d}-" + "x" * 40)
        paths = [f"pkg{i}/{'d' * 60}/{j}.py" for j in range(20)]
        await api.ok({"type": "claim_files", "session_id": other, "issue": f"BIG-{i}", "paths": paths})
        await api.ok({"type": "post_message", "session_id": other, "channel": f"agent:{me}", "body": "m" * 4000})
    text = context(await hooks.send("claude", claude("SessionStart", sid, source="resume")))
    assert len(text) <= 4000 and session_in(text) == me and "more" in text


async def test_bad_bodies_are_422_naming_the_field_and_readers_403(api: Api, server: ServerProcess) -> None:
    hooks = Hooks(api)
    good = claude("SessionStart", "eb58c0de-9999-4000-8000-000000000009")
    bad: list[tuple[Any, str]] = [
        ({k: v for k, v in good.items() if k != "session_id"}, "session_id"),
        ({k: v for k, v in good.items() if k != "cwd"}, "cwd"),
        ({k: v for k, v in good.items() if k != "hook_event_name"}, "hook_event_name"),
        (good | {"session_id": ""}, "session_id"),
        (good | {"cwd": 5}, "cwd"),
        (good | {"hook_event_name": 7}, "hook_event_name"),
        ({**claude("PreToolUse", "s"), "tool_input": {}}, "tool_name"),
        (claude("PreToolUse", "s", tool_name="Write", tool_input={"content": "x"}), "tool_input.file_path"),
        (claude("PreToolUse", "s", tool_name="Edit", tool_input="x"), "tool_input.file_path"),
        (
            claude("PreToolUse", "s", tool_name="NotebookEdit", tool_input={"file_path": "a"}),
            "tool_input.notebook_path",
        ),
        (codex("PreToolUse", "s", tool_name="apply_patch", tool_input={"patch": 1}), "tool_input.command"),
        (claude("Stop", "s", last_assistant_message=3), "last_assistant_message"),
        ([good], "body"),
        ("a string", "body"),
    ]
    for body, field in bad:
        err = await hooks.refused("claude", body, 422, "VALIDATION")
        assert err["details"]["field"] == field, (body, err)
    r = await api.http.post("/v1/hooks/claude", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "body"
    await hooks.refused(
        "claude", None, 415, "UNSUPPORTED_MEDIA_TYPE", content=b"x", headers={"content-type": "text/plain"}
    )
    err = await hooks.refused("cursor", good, 422, "VALIDATION")
    assert err["details"]["field"] == "harness"
    # Another event of the harness is a hook payload too: nothing to say.
    assert await hooks.send("claude", claude("Notification", "eb58c0de-9999", message="hi")) == {}

    reader = await api.client("reader")
    try:
        await Hooks(reader).refused("claude", good, 403, "FORBIDDEN")
        await Hooks(reader).refused("claude", claude_write("s", f"{CWD}/a.py"), 403, "FORBIDDEN")
    finally:
        await reader.close()
    anonymous = httpx.AsyncClient(base_url=server.base_url)
    try:
        assert (await anonymous.post("/v1/hooks/claude", json=good)).status_code == 401
    finally:
        await anonymous.aclose()
    assert await sessions_of(api, "claude", good["session_id"]) == []


async def test_concurrent_first_hooks_on_two_replicas_make_one_session(
    start_server: Callable[..., ServerProcess],
) -> None:
    servers = [start_server(), start_server()]
    clients = [httpx.AsyncClient(base_url=s.base_url, timeout=60) for s in servers]
    api = Api(servers[0].base_url)
    harness_sids = [f"eb58c0de-aaaa-4000-8000-{n:012d}" for n in range(4)]

    def payload(i: int, sid: str) -> dict[str, Any]:
        match i % 4:
            case 0:
                return claude("SessionStart", sid)
            case 1:
                return claude_write(sid, f"{CWD}/{sid[-2:]}/file{i}.py")
            case 2:
                return claude("UserPromptSubmit", sid, prompt="go")
        return claude("PostToolUse", sid, tool_name="Bash")

    async def send(i: int, sid: str) -> None:
        r = await clients[i % 2].post(
            "/v1/hooks/claude", json=payload(i, sid), headers={"authorization": f"Bearer {api_token}"}
        )
        assert r.status_code == 200, r.text
        assert "permissionDecision" not in r.text, r.text  # each writes files of its own

    api_token = "test-bootstrap-token"
    try:
        await asyncio.gather(*(send(i, sid) for sid in harness_sids for i in range(24)))
        registered = await api.events("AgentRegistered")
        for sid in harness_sids:
            mine = [e for e in registered if e["data"]["actor_key"] == actor_of("claude", sid)]
            assert len(mine) == 1, (sid, mine)
            session = mine[0]["data"]["session_id"]
            held = {c[0] for c in await claims(api) if c[2] == session}
            assert held == {f"{sid[-2:]}/file{i}.py" for i in range(1, 24, 4)}
    finally:
        for c in clients:
            await c.aclose()
        await api.close()


async def test_a_flood_of_hooks_costs_one_heartbeat_per_third_of_the_ttl(
    start_server: Callable[..., ServerProcess],
) -> None:
    ttl = 3
    api = Api(start_server(ttl_seconds=ttl).base_url)
    hooks = Hooks(api)
    try:
        sid = "eb58c0de-bbbb-4000-8000-00000000000b"
        me = session_in(context(await hooks.send("claude", claude("SessionStart", sid))))
        sent = 1
        started = time.monotonic()

        async def flood(lane: int) -> None:
            """Hooks as fast as they are answered, for the whole TTL: many due at once."""
            nonlocal sent
            while time.monotonic() - started < ttl:
                event = ("UserPromptSubmit", "PostToolUse", "Stop")[(sent + lane) % 3]
                await hooks.send("claude", claude(event, sid, prompt="x", tool_name="Bash", last_assistant_message="m"))
                sent += 1

        await asyncio.gather(*(flood(lane) for lane in range(6)))
        mine = [e for e in await api.events() if e["metadata"].get("session_id") == me]
        beats = [e for e in mine if e["type"] == "AgentHeartbeat"]
        assert beats and len(mine) * 4 < sent, (sent, [e["type"] for e in mine])
        # Each heartbeat came a third of the TTL or more after the sign of life before it. A
        # commit stamps its events with the clock its batch read when it began (a PostgreSQL
        # batch may reuse the one before it for up to CHAIN_FRESH_S), which can trail the
        # moment the hook found the heartbeat due by that much.
        slack = int(CHAIN_FRESH_S * 1_000_000) + 5_000
        for before, beat in itertools.pairwise(mine):
            if beat["type"] == "AgentHeartbeat":
                gap = parse_time(beat["recorded_at"]) - parse_time(before["recorded_at"])
                assert gap >= ttl * 1_000_000 // 3 - slack, (before, beat)
        # The hooks kept it live all along: no second session was registered for it.
        assert [a["session_id"] for a in await sessions_of(api, "claude", sid)] == [me]
    finally:
        await api.close()
