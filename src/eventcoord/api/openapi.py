"""The OpenAPI schema at ``/schema``, completed where Litestar cannot see our shapes.

``POST /v1/commands`` is an ASGI route that decodes its body itself (one msgspec pass), so
Litestar's generated schema leaves it out; here it is written whole. Every read answers
``Response[bytes]``, so the generated schema knows no answer's shape either. The command
body is described as the tagged union of every command
(discriminated by ``type``, one example each), the command answers as the success and
error envelopes, every read's 200 as its result struct (the typed client's, the one
description of those shapes), and the hook route's body and answer as the harnesses' own.
"""

from __future__ import annotations

import inspect
from typing import Any

import msgspec
from litestar import Litestar
from litestar._openapi.plugin import OpenAPIPlugin

from eventcoord.api.routes.hooks import post_hook
from eventcoord.client.operations import READS
from eventcoord.commands import COMMAND_TYPES, AnyCommand
from eventcoord.harness.answers import HookAnswer, HookSession
from eventcoord.harness.payloads import AnyPayload

REF = "#/components/schemas/{name}"

#: The Litestar operation id of each read route → the read's name in client.operations.
READ_OPERATIONS = {
    "listAgents": "list_agents",
    "getAgent": "get_agent",
    "listLeases": "list_leases",
    "issueState": "get_issue_state",
    "listFileClaims": "list_file_claims",
    "listConflicts": "list_conflicts",
    "codeHeatmap": "get_code_heatmap",
    "listQueue": "list_queue",
    "listNamedLeases": "list_named_leases",
    "listWaits": "list_waits",
    "listMessages": "read_messages",
    "listEvents": "read_events",
}

#: A plausible value for each field a command requires, by field name.
_SAMPLE: dict[str, Any] = {
    "session_id": "s-0188f2a4c1d2e3f4a5b6c7d8e9f0a1b2",
    "project": "PROJ",
    "issue": "PROJ-1",
    "paths": ["src/app/", "docs/*.md"],
    "channel": "issue:PROJ-1",
    "body": "starting on the parser",
    "role": "agent",
    "wip_limit": 3,
    "item_id": "w-0188f2a4c1d2e3f4a5b6c7d8e9f0a1b2",
    "name": "dispatcher",
    "token_id": "tok_0123456789abcdef01234567",
    "outcome": "done",
}
#: Optional fields worth showing in an example.
_EXTRA: dict[str, dict[str, Any]] = {
    "register_agent": {"actor": "alice", "host": "laptop-1", "kind": "agent"},
    "claim_issue": {"command_id": "claim-PROJ-1-1"},
    "enqueue_work": {"issue": "PROJ-1", "priority": 5, "payload": {"task": "fix"}},
    "acquire_lease": {"ttl_seconds": 30},
}


#: Hook payloads as the harnesses send them (shortened from recorded real ones).
HOOK_EXAMPLES: dict[str, dict[str, Any]] = {
    "SessionStart": {
        "session_id": "eb58c0de-0000-4000-8000-000000000001",
        "cwd": "/home/dev/proj",
        "hook_event_name": "SessionStart",
        "source": "startup",
    },
    "PreToolUse (Claude Code Write)": {
        "session_id": "eb58c0de-0000-4000-8000-000000000001",
        "cwd": "/home/dev/proj",
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": "/home/dev/proj/hello.txt", "content": "hello"},
    },
    "PreToolUse (Codex apply_patch)": {
        "session_id": "01a2b3c4-0000-7000-8000-000000000002",
        "cwd": "/home/dev/proj",
        "hook_event_name": "PreToolUse",
        "tool_name": "apply_patch",
        "tool_input": {"command": "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"},
    },
    "Stop": {
        "session_id": "eb58c0de-0000-4000-8000-000000000001",
        "cwd": "/home/dev/proj",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": "done",
    },
    "SessionEnd": {
        "session_id": "eb58c0de-0000-4000-8000-000000000001",
        "cwd": "/home/dev/proj",
        "hook_event_name": "SessionEnd",
        "reason": "other",
    },
}


def command_example(tag: str) -> dict[str, Any]:
    """A valid body of command ``tag``: its required fields, plus a few telling optional ones."""
    struct = COMMAND_TYPES[tag]
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    body: dict[str, Any] = {"type": tag}
    for f in info.fields:
        if f.required:
            body[f.encode_name] = _SAMPLE[f.encode_name]
    return body | _EXTRA.get(tag, {})


class _Ok(msgspec.Struct, kw_only=True):
    """A command's success answer."""

    ok: bool
    result: dict[str, Any] | None
    events: list[_EventRef]
    position: int


class _EventRef(msgspec.Struct, kw_only=True):
    position: int
    type: str


class _ErrorBody(msgspec.Struct, kw_only=True):
    code: str
    message: str
    details: dict[str, Any] = {}


class _Refused(msgspec.Struct, kw_only=True):
    """The error envelope: every 4xx and 5xx (``events``/``position`` when a refusal was recorded)."""

    ok: bool
    error: _ErrorBody
    events: list[_EventRef] = []
    position: int | None = None


def _json(schema: dict[str, Any], description: str, **extra: Any) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema, **extra}}}


def complete(schema: dict[str, Any]) -> dict[str, Any]:
    """Fill in the command body and the answers' shapes (in place; returns ``schema``)."""
    results = {op.name: op.result for op in READS}
    names = sorted(set(READ_OPERATIONS.values()))
    types: list[Any] = [AnyCommand, _Ok, _Refused, AnyPayload, HookAnswer, HookSession, *(results[n] for n in names)]
    refs, components = msgspec.json.schema_components(types, ref_template=REF)
    schema.setdefault("components", {}).setdefault("schemas", {}).update(components)
    command_ref, ok_ref, refused_ref, hook_ref, hook_answer_ref, hook_session_ref, *read_refs = refs
    by_read = dict(zip(names, read_refs, strict=True))
    refused = _json(refused_ref, "refused: the error envelope with a stable code")
    # POST /v1/commands is an ASGI route (``routes/commands.py``), which Litestar leaves out:
    # it goes first, where the route table lists it.
    command = {"summary": "Send a command", "operationId": "postCommand", "responses": {}, "deprecated": False}
    schema["paths"] = {"/v1/commands": {"post": command}, **schema.get("paths", {})}
    for item in schema.get("paths", {}).values():
        for method, op in item.items():
            if not isinstance(op, dict) or method not in ("get", "post"):
                continue
            op_id = op.get("operationId")
            responses = op.setdefault("responses", {})
            if op_id == "postCommand":
                examples = {tag: {"value": command_example(tag)} for tag in COMMAND_TYPES}
                op["requestBody"] = {
                    "required": True,
                    "description": "a command: a JSON object tagged by `type`",
                    "content": {"application/json": {"schema": command_ref, "examples": examples}},
                }
                responses["200"] = _json(ok_ref, "done: the command's result, the events it appended")
                for status in ("401", "403", "404", "409", "413", "415", "422", "429", "503"):
                    responses[status] = refused
            elif op_id == "postHook":
                op["description"] = inspect.cleandoc(post_hook.fn.__doc__ or "")
                op["requestBody"] = {
                    "required": True,
                    "description": "the JSON the harness gives a hook, tagged by `hook_event_name`",
                    "content": {
                        "application/json": {
                            "schema": hook_ref,
                            "examples": {name: {"value": v} for name, v in HOOK_EXAMPLES.items()},
                        }
                    },
                }
                responses.pop("400", None)  # a bad path or body is 422 VALIDATION, as everywhere
                responses["200"] = _json(hook_answer_ref, "the JSON the harness reads: {}, context, or a deny")
                for status in ("401", "403", "413", "415", "422", "429", "503"):
                    responses[status] = refused
            elif op_id == "getHookSession":
                responses.pop("400", None)
                responses["200"] = _json(hook_session_ref, "the bound eventcoord session")
                for status in ("401", "404", "422", "429", "503"):
                    responses[status] = refused
            elif op_id in READ_OPERATIONS:
                responses["200"] = _json(by_read[READ_OPERATIONS[op_id]], "the read's answer")
                for status in ("401", "404", "422", "503"):
                    responses.setdefault(status, refused)
    return schema


def install(app: Litestar) -> None:
    """Complete ``app``'s OpenAPI schema once, at start-up: the plugin serves the dict it
    cached, which :func:`complete` fills in place."""
    complete(app.plugins.get(OpenAPIPlugin).provide_openapi_schema())
