"""MCP tools from the operation table: a tool per command and per read, thin over HTTP.

A tool's input schema is its struct's JSON schema (the tag left out; the session field
optional, since the connection remembers it). A success answers the command's ``result`` (a
read's body) as structured content; a refusal is a tool error whose structured content is
the envelope's ``error`` object.
"""

from __future__ import annotations

import copy
import json
import re
import socket
from typing import Any

import mcp_types as types
import msgspec

from eventcoord.client import AsyncClient, Refused, Unreachable
from eventcoord.client.guide import FIELD, describe
from eventcoord.client.operations import BY_NAME, OPERATIONS, Operation, read_request
from eventcoord.codec import in_words
from eventcoord.mcp.sessions import Remembered

SESSION_HELP = "omit it to use the session this connection registered (register_agent)"
_AT = re.compile(r"at `\$\.?(?P<path>[^`]*)`")
_NAMED = re.compile(r"(?:missing required|unknown) field `(?P<name>[^`]+)`")


def input_schema(op: Operation) -> dict[str, Any]:
    """The tool's JSON schema: the struct's fields (wire names), the ``type`` tag excluded."""
    _, components = msgspec.json.schema_components([op.struct])
    schema: dict[str, Any] = copy.deepcopy(components[op.struct.__name__])
    if "$ref" in json.dumps(schema):
        raise TypeError(f"{op.name}: nested schemas are not supported in tool inputs")
    schema.pop("title", None)
    props: dict[str, Any] = schema.setdefault("properties", {})
    tag = "type" if op.kind == "command" else None  # a read's ``type`` is a parameter (read_events)
    if tag:
        props.pop(tag, None)
    required = [r for r in schema.get("required", []) if r != tag and r != op.session_field]
    for name, prop in props.items():
        if name in FIELD:
            prop["description"] = FIELD[name]
    if op.session_field and op.session_field in props:
        props[op.session_field]["description"] = f"{FIELD[op.session_field]}; {SESSION_HELP}"
    schema["required"] = required
    schema["type"] = "object"
    return schema


TOOLS: list[types.Tool] = [
    types.Tool(
        name=op.name,
        description=describe(op.name),
        input_schema=input_schema(op),
        annotations=types.ToolAnnotations(read_only_hint=op.kind == "read", open_world_hint=False),
    )
    for op in OPERATIONS
]


def tool_error(code: str, message: str, details: dict[str, Any] | None = None) -> types.CallToolResult:
    """A tool error carrying the envelope's ``error`` object."""
    error = {"code": code, "message": message, "details": details or {}}
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps({"error": error}))], structured_content=error, is_error=True
    )


def _validation(message: str) -> types.CallToolResult:
    field = ""
    if m := _AT.search(message):
        field = m.group("path")
    if n := _NAMED.search(message):
        field = f"{field}.{n.group('name')}" if field else n.group("name")
    return tool_error("VALIDATION", in_words(message), {"field": field or "arguments"})


def validate(op: Operation, args: dict[str, Any]) -> types.CallToolResult | None:
    """None when ``args`` decode as the operation's struct, else the VALIDATION tool error."""
    body = {"type": op.name, **args} if op.kind == "command" else args
    target: Any = op.struct
    if op.kind == "command":
        from eventcoord.commands import AnyCommand

        target = AnyCommand
    try:
        msgspec.json.decode(msgspec.json.encode(body), type=target)
    except msgspec.ValidationError as e:
        if op.session_field and op.session_field not in args:
            return tool_error(
                "VALIDATION",
                f"{op.session_field} is required: call register_agent first (this connection then remembers "
                "your session), or pass it",
                {"field": op.session_field},
            )
        return _validation(str(e))
    return None


def _defaults(op: Operation, args: dict[str, Any], stdio: bool) -> None:
    """register_agent from an MCP server records the host, and on stdio the agent process."""
    if op.name != "register_agent":
        return
    args.setdefault("host", socket.gethostname())
    if stdio and not any(args.get(k) for k in ("actor", "runtime_session_id", "process_ancestry")):
        from eventcoord.client.identity import process_ancestry

        ancestry = process_ancestry()
        if ancestry:
            args["process_ancestry"] = ancestry


async def call(
    client: AsyncClient, memory: Remembered | None, name: str, arguments: dict[str, Any] | None, stdio: bool
) -> types.CallToolResult:
    """Run one tool: fill in the remembered session, validate, send, translate the answer."""
    op = BY_NAME.get(name)
    if op is None:
        return tool_error("VALIDATION", f"no tool named {name!r}", {"field": "name"})
    if arguments is not None and not isinstance(arguments, dict):
        return tool_error("VALIDATION", "arguments must be an object", {"field": "arguments"})
    args = dict(arguments or {})
    if op.session_field and args.get(op.session_field) is None and memory is not None and memory.current:
        args[op.session_field] = memory.current
    _defaults(op, args, stdio)
    invalid = validate(op, args)
    if invalid is not None:
        return invalid
    try:
        if op.kind == "command":
            reply = await client.send({"type": op.name, **args})
        else:
            path, params = read_request(op, args)
            reply = await client.fetch(path, params)
        refused = reply.refusal()
    except Unreachable as e:
        return tool_error("UNREACHABLE", f"the eventcoord server did not answer: {e}; it is safe to retry")
    if refused is not None:
        return _refused(refused)
    body = reply.payload()
    result = (body.get("result") or {}) if op.kind == "command" else body
    if memory is not None:
        if op.name == "register_agent":
            memory.remember(result["session_id"], int(result["ttl_seconds"]))
        elif op.name == "end_agent":
            memory.forget(args["session_id"])
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(result))], structured_content=result)


def _refused(refused: Refused) -> types.CallToolResult:
    return tool_error(refused.code, refused.message, refused.details)
