"""Hook payloads as the real harnesses send them decode; anything else is 422 naming the field;
answers are exactly the JSON a harness reads."""

from __future__ import annotations

import json

import msgspec
import pytest

from eventcoord.errors import ValidationFailed
from eventcoord.harness.answers import NOTHING, deny, tell
from eventcoord.harness.payloads import (
    OtherEvent,
    PostToolUse,
    PreToolUse,
    SessionEnd,
    SessionStart,
    Stop,
    UserPromptSubmit,
    decode_payload,
)

# As recorded from Claude Code 2.1.197 and Codex 0.171.0 (shared/reference/harnesses.md).
RECORDED = [
    (
        '{"session_id":"eb58","transcript_path":"/h/.claude/projects/-home-dev-proj/eb58.jsonl",'
        '"cwd":"/home/dev/proj","hook_event_name":"SessionStart","source":"startup"}',
        SessionStart,
    ),
    (
        '{"session_id":"eb58","transcript_path":"t","cwd":"/home/dev/proj","prompt_id":"e54b",'
        '"permission_mode":"acceptEdits","hook_event_name":"UserPromptSubmit","prompt":"write hello"}',
        UserPromptSubmit,
    ),
    (
        '{"session_id":"eb58","transcript_path":"t","cwd":"/home/dev/proj","prompt_id":"e54b",'
        '"permission_mode":"acceptEdits","effort":{"level":"high"},"hook_event_name":"PreToolUse",'
        '"tool_name":"Write","tool_input":{"file_path":"/home/dev/proj/hello.txt","content":"hello"},'
        '"tool_use_id":"toolu_3"}',
        PreToolUse,
    ),
    (
        '{"session_id":"eb58","transcript_path":"t","cwd":"/home/dev/proj","hook_event_name":"PostToolUse",'
        '"tool_name":"Write","tool_input":{"file_path":"/home/dev/proj/hello.txt"},'
        '"tool_response":{"type":"create","filePath":"/home/dev/proj/hello.txt"},"duration_ms":12}',
        PostToolUse,
    ),
    (
        '{"session_id":"eb58","transcript_path":"t","cwd":"/home/dev/proj","hook_event_name":"Stop",'
        '"stop_hook_active":false,"last_assistant_message":"done","background_tasks":[],"session_crons":[]}',
        Stop,
    ),
    (
        '{"session_id":"eb58","transcript_path":"t","cwd":"/home/dev/proj","prompt_id":"e54b",'
        '"hook_event_name":"SessionEnd","reason":"other"}',
        SessionEnd,
    ),
    (
        '{"session_id":"01a2","turn_id":"01a2","transcript_path":"/h/.codex/sessions/2026/12/07/rollout.jsonl",'
        '"cwd":"/home/dev/proj","hook_event_name":"PreToolUse","model":"gpt-5.5",'
        '"permission_mode":"bypassPermissions","tool_name":"apply_patch","tool_input":{"command":'
        '"*** Begin Patch\\n*** Add File: /home/dev/proj/hello.txt\\n+hello\\n*** End Patch\\n"},'
        '"tool_use_id":"call_3"}',
        PreToolUse,
    ),
    (
        '{"session_id":"01a2","cwd":"/home/dev/proj","hook_event_name":"PostToolUse","tool_name":"apply_patch",'
        '"tool_input":{"command":"x"},"tool_response":"Success. Updated the following files"}',
        PostToolUse,
    ),
]


@pytest.mark.parametrize(("body", "kind"), RECORDED)
def test_recorded_payloads_decode(body: str, kind: type) -> None:
    payload = decode_payload(body.encode())
    assert type(payload) is kind
    assert payload.cwd == "/home/dev/proj" and payload.session_id in ("eb58", "01a2")


def test_another_event_of_the_harness_is_a_payload_too() -> None:
    payload = decode_payload(b'{"session_id":"x","cwd":"/","hook_event_name":"Notification","message":"hi"}')
    assert isinstance(payload, OtherEvent) and payload.hook_event_name == "Notification"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"", "body"),
        (b"{", "body"),
        (b"[]", "body"),
        (b'{"cwd":"/","hook_event_name":"Stop"}', "session_id"),
        (b'{"session_id":"","cwd":"/","hook_event_name":"Stop"}', "session_id"),
        (b'{"session_id":"x","hook_event_name":"Stop"}', "cwd"),
        (b'{"session_id":"x","cwd":"/"}', "hook_event_name"),
        (b'{"session_id":"x","cwd":"/","hook_event_name":null}', "hook_event_name"),
        (b'{"session_id":"x","cwd":"/","hook_event_name":"Other","session_id":1}', "session_id"),
        (b'{"session_id":"x","cwd":"/","hook_event_name":"PreToolUse"}', "tool_name"),
        (b'{"session_id":"x","cwd":"/","hook_event_name":"Stop","stop_hook_active":"no"}', "stop_hook_active"),
        (b'{"session_id":"x","cwd":"/","hook_event_name":"SessionStart","source":1}', "source"),
        (b"[" * 100000, "body"),
    ],
)
def test_a_body_that_is_not_a_hook_payload_is_422_naming_the_field(body: bytes, field: str) -> None:
    with pytest.raises(ValidationFailed) as e:
        decode_payload(body)
    assert e.value.details["field"] == field


def test_answers_are_the_json_the_harness_reads_and_never_allow() -> None:
    assert msgspec.json.encode(NOTHING) == b"{}"
    assert json.loads(msgspec.json.encode(tell("SessionStart", "hello"))) == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "hello"}
    }
    assert tell("Stop", "") is NOTHING
    assert json.loads(msgspec.json.encode(deny("held by alice"))) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "held by alice",
        }
    }
