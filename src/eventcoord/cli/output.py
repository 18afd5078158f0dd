"""Printing answers: plain-text tables and summaries by default, the server's JSON with ``--json``.

A refusal prints its code as the first word on stderr, then the message and details.
Tables are laid out here (columns padded, a rule under the header) rather than by a
terminal library, whose import would cost more than the rest of a read.
"""

from __future__ import annotations

import argparse
import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    from eventcoord.cli.exchange import Answer, Server
    from eventcoord.cli.subcommands import Subcommand

    class WithStatus(Protocol):
        """A refusal as the CLI's own requests or the typed client report it: its HTTP status
        and details."""

        @property
        def status(self) -> int: ...

        @property
        def details(self) -> dict[str, Any]: ...


#: The columns each list read shows, in order (other fields: ``--json``).
COLUMNS: dict[str, tuple[str, ...]] = {
    "list_agents": ("session_id", "actor_key", "kind", "live", "working_on", "host", "last_heartbeat_at"),
    "list_leases": ("issue", "project", "session_id", "actor_key", "fencing_token", "live"),
    "list_file_claims": ("path", "issue", "session_id", "actor_key", "exclusive", "live"),
    "list_conflicts": (
        "position",
        "path",
        "issue",
        "session_id",
        "holder_path",
        "holder_issue",
        "holder_session_id",
        "forced",
        "occurred_at",
    ),
    "get_code_heatmap": ("prefix", "count"),
    "list_queue": ("item_id", "project", "issue", "priority", "status", "session_id", "fencing_token", "attempts"),
    "list_named_leases": ("name", "capacity", "session_id", "actor_key", "fencing_token", "expires_at", "held"),
    # One row per waiter, by line then place; ``issue`` is the files wait's issue (else "-").
    "list_waits": ("kind", "key", "place", "session_id", "actor_key", "issue", "since"),
    "read_messages": ("position", "channel", "actor_key", "body", "recorded_at"),
    "read_events": ("position", "type", "stream", "recorded_at", "data"),
    # ``eventcoord agent SID``: what the session holds now, then what it held and worked on.
    "agent_leases": ("issue", "project", "fencing_token", "granted_at"),
    "agent_file_claims": ("path", "issue", "exclusive", "claimed_at"),
    "agent_named_leases": ("name", "fencing_token", "expires_at", "expired"),
    "agent_work": ("item_id", "project", "issue", "status", "outcome", "current_worker"),
    "agent_past_leases": ("issue", "project", "fencing_token", "granted_at", "released_at", "release_reason"),
}


def table(header: list[str] | None, rows: list[list[str]]) -> None:
    """Print ``rows`` in padded columns, under ``header`` and a rule when there is one."""
    lines = ([header] if header else []) + rows
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))] if lines else []

    def laid_out(cells: list[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    out = [] if header is None else [laid_out(header), laid_out(["─" * w for w in widths])]
    out += [laid_out(row) for row in rows]
    sys.stdout.write("".join(line + "\n" for line in out))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # One line per row: a line break in a value is shown as \n.
    return str(value).replace("\r", "\\r").replace("\n", "\\n")


def fail(code: str, message: str, details: dict[str, Any] | None = None) -> None:
    """Print a refusal on stderr: the code first, then the message, then the details."""
    print(f"{code} {message}", file=sys.stderr)
    for key, value in (details or {}).items():
        print(f"  {key}: {_cell(value)}", file=sys.stderr)


def exit_code(refused: WithStatus) -> int:
    """1 refused; 5 refused but waiting in line (``wait: true`` joined or kept a place); 4 for
    401/403; 3 for a 5xx."""
    if refused.status in (401, 403):
        return 4
    if refused.status >= 500:
        return 3
    return 5 if isinstance(refused.details.get("waiting"), dict) else 1


def summary(data: dict[str, Any], title: str | None = None) -> None:
    """Key/value lines, under ``title``."""
    if title:
        print(title)
    table(None, [[key, _cell(value)] for key, value in data.items()])


def rows(name: str, items: list[dict[str, Any]], title: str | None = None) -> None:
    """A table of ``items`` with the read's columns, under ``title``."""
    if title:
        print(title)
    if not items:
        print("(none)")
        return
    columns = COLUMNS.get(name) or tuple(k for k, v in items[0].items() if not isinstance(v, dict | list))
    table(list(columns), [[_cell(item.get(c)) for c in columns] for item in items])


def agent(body: dict[str, Any], server: Server) -> None:
    """One session: its summary, what it holds now (issue leases, file claims, named leases),
    then the leases it held and the work it touched."""
    session_id = body["agent"].get("session_id")
    summary(body["agent"], title=f"session {session_id}")
    leases = body.get("leases") or []
    claims = server.read("/v1/file-claims", {"session_id": session_id})
    holds = (
        ("agent_leases", [x for x in leases if x.get("released_at") is None], "holds issue leases"),
        (
            "agent_file_claims",
            claims.payload().get("file_claims", []) if claims.refusal() is None else [],
            "holds file claims",
        ),
        ("agent_named_leases", body.get("named_leases") or [], "holds named leases"),
        ("agent_past_leases", [x for x in leases if x.get("released_at") is not None], "held before"),
        ("agent_work", body.get("work") or [], "work"),
    )
    if not any(items for _, items, _ in holds[:3]):
        print("holds nothing")
    for name, items, title in holds:
        if items:
            print()
            rows(name, items, title=title)


def show(spec: Subcommand, answer: Answer, args: argparse.Namespace, server: Server) -> int:
    """Print ``answer`` for ``spec``; the exit code."""
    refused = answer.refusal()
    if getattr(args, "_json", False):
        sys.stdout.write(answer.body.decode() + "\n")
    if refused is not None:
        on_refused = getattr(args, "_on_refused", None)
        extra = on_refused(args, refused, server) if on_refused is not None else None
        fail(refused.code, refused.message, {**refused.details, **(extra or {})})
        if refused.status == 401:
            print(f"  token: {server.target.source}", file=sys.stderr)
        return exit_code(refused)
    if getattr(args, "_json", False):
        return 0
    body = answer.payload()
    if spec["kind"] == "command":
        result = body.get("result") or {}
        field = getattr(args, "_print", None)
        if field:
            print(_cell(result.get(field)) if isinstance(result, dict) else "-")
            return 0
        summary(
            result if isinstance(result, dict) else {"result": result},
            title=f"{spec['name']}: done (position {body.get('position')})",
        )
        return 0
    if spec["name"] == "get_agent":
        agent(body, server)
        return 0
    lists = [k for k, v in body.items() if isinstance(v, list)]
    if spec["name"] == "get_code_heatmap":
        print(f"mode {body.get('mode')}, depth {body.get('depth')}")
    if lists:
        rows(spec["name"], body[lists[0]])
        if body.get("next"):  # a paged read with more to come
            print(f"(more: --after {body['next']})")
    else:
        summary(body)
    return 0
