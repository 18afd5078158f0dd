"""The table of contents of every client: each command and read, its struct, result and route.

One source of truth. The typed client's methods (``generated/``), the CLI's subcommands
and the MCP server's tools are all derived from ``OPERATIONS``; a command added to
``eventcoord.commands`` appears in all three.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import msgspec.inspect as mi

from eventcoord.client import reads, results
from eventcoord.commands import COMMAND_TYPES

COMMANDS_PATH = "/v1/commands"


@dataclass(frozen=True, slots=True)
class Operation:
    """One command or read as every face of eventcoord exposes it."""

    name: str
    kind: Literal["command", "read"]
    struct: type[msgspec.Struct]
    result: type[results.Result]
    #: CLI subcommand: the command type with _ -> -, or the read's short name (docs/protocol.md#clients).
    cli: str
    #: ``/v1/commands``, or the read route; ``{field}`` segments are filled from the struct.
    path: str = COMMANDS_PATH
    #: Fields the CLI takes as positional arguments (``eventcoord state ISSUE``).
    positional: tuple[str, ...] = ()
    #: The field (wire name) an MCP session fills in with its remembered session id.
    session_field: str | None = None

    def fields(self) -> tuple[mi.Field, ...]:
        """The struct's fields, the tag excluded."""
        info = mi.type_info(self.struct)
        assert isinstance(info, mi.StructType)
        return info.fields


def _read(
    name: str, struct: type[reads.Read], result: type[results.Result], cli: str, path: str, **extra: Any
) -> Operation:
    return Operation(name=name, kind="read", struct=struct, result=result, cli=cli, path=path, **extra)


READS: tuple[Operation, ...] = (
    _read("list_agents", reads.ListAgents, results.AgentsPage, "agents", "/v1/agents"),
    _read(
        "get_agent", reads.GetAgent, results.AgentDetail, "agent", "/v1/agents/{session_id}", positional=("session_id",)
    ),
    _read("list_leases", reads.ListLeases, results.LeasesPage, "leases", "/v1/leases"),
    _read(
        "get_issue_state",
        reads.GetIssueState,
        results.IssueState,
        "state",
        "/v1/issues/{issue}/state",
        positional=("issue",),
        session_field="as",
    ),
    _read("list_file_claims", reads.ListFileClaims, results.FileClaimsPage, "file-claims", "/v1/file-claims"),
    _read("list_conflicts", reads.ListConflicts, results.ConflictsPage, "conflicts", "/v1/conflicts"),
    _read("get_code_heatmap", reads.GetCodeHeatmap, results.Heatmap, "heatmap", "/v1/heatmap"),
    _read("list_queue", reads.ListQueue, results.QueuePage, "queue", "/v1/queue"),
    _read("list_named_leases", reads.ListNamedLeases, results.NamedLeasesPage, "named-leases", "/v1/named-leases"),
    _read("list_waits", reads.ListWaits, results.WaitsPage, "waits", "/v1/waits"),
    _read("read_messages", reads.ReadMessages, results.MessagesPage, "messages", "/v1/messages"),
    _read("read_events", reads.ReadEvents, results.EventsPage, "events", "/v1/events"),
)


def _command(tag: str, struct: type[msgspec.Struct]) -> Operation:
    has_session = "session_id" in struct.__struct_fields__
    return Operation(
        name=tag,
        kind="command",
        struct=struct,
        result=results.COMMAND_RESULTS.get(tag, results.CommandResult),
        cli=tag.replace("_", "-"),
        session_field="session_id" if has_session else None,
    )


COMMANDS: tuple[Operation, ...] = tuple(_command(tag, struct) for tag, struct in COMMAND_TYPES.items())
OPERATIONS: tuple[Operation, ...] = COMMANDS + READS
BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}


def read_request(op: Operation, query: msgspec.Struct | dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The URL path and query parameters of a read (wire names): path fields filled, ``None`` left out."""
    from urllib.parse import quote

    values = msgspec.to_builtins(query) if isinstance(query, msgspec.Struct) else query
    params = {k: v for k, v in values.items() if v is not None}
    path = op.path
    for f in op.fields():
        token = "{" + f.encode_name + "}"
        if token in path:
            path = path.replace(token, quote(str(params.pop(f.encode_name)), safe="/:"))
    return path, params
