"""Printing answers: tables and summaries (rich) by default, the server's JSON with ``--json``.

A refusal prints its code as the first word on stderr, then the message and details.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from eventcoord.client import Client, Refused, Reply
    from eventcoord.client.operations import Operation

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


def console(stderr: bool = False) -> Console:
    """A rich console; wide when not a terminal, so piped tables are not folded."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, width=None if stream.isatty() else 200, highlight=False, soft_wrap=not stream.isatty())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def fail(code: str, message: str, details: dict[str, Any] | None = None) -> None:
    """Print a refusal on stderr: the code first, then the message, then the details."""
    print(f"{code} {message}", file=sys.stderr)
    for key, value in (details or {}).items():
        print(f"  {key}: {_cell(value)}", file=sys.stderr)


def exit_code(refused: Refused) -> int:
    """1 refused; 5 refused but waiting in line (``wait: true`` joined or kept a place); 4 for
    401/403; 3 for a 5xx."""
    if refused.status in (401, 403):
        return 4
    if refused.status >= 500:
        return 3
    return 5 if isinstance(refused.details.get("waiting"), dict) else 1


def summary(data: dict[str, Any], title: str | None = None) -> None:
    """A two-column key/value table."""
    from rich.table import Table

    table = Table(show_header=False, box=None, title=title, title_justify="left", pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in data.items():
        table.add_row(key, _cell(value))
    console().print(table)


def rows(name: str, items: list[dict[str, Any]], title: str | None = None) -> None:
    """A table of ``items`` with the read's columns."""
    from rich import box
    from rich.table import Table

    if not items:
        console().print("(none)")
        return
    columns = COLUMNS.get(name) or tuple(k for k, v in items[0].items() if not isinstance(v, dict | list))
    table = Table(*columns, header_style="bold", box=box.SIMPLE_HEAD, title=title, title_justify="left")
    for item in items:
        table.add_row(*(_cell(item.get(c)) for c in columns))
    console().print(table)


def agent(body: dict[str, Any], client: Client) -> None:
    """One session: its summary, what it holds now (issue leases, file claims, named leases),
    then the leases it held and the work it touched."""
    summary(body["agent"], title=f"session {body['agent'].get('session_id')}")
    leases = body.get("leases") or []
    held = [x for x in leases if x.get("released_at") is None]
    claims = client.fetch("/v1/file-claims", {"session_id": body["agent"].get("session_id")})
    files = claims.payload().get("file_claims", []) if claims.refusal() is None else []
    holds = (
        ("agent_leases", held, "holds issue leases"),
        ("agent_file_claims", files, "holds file claims"),
        ("agent_named_leases", body.get("named_leases") or [], "holds named leases"),
    )
    if not any(items for _, items, _ in holds):
        console().print("holds nothing")
    for name, items, title in holds:
        if items:
            rows(name, items, title=title)
    past = [x for x in leases if x.get("released_at") is not None]
    for name, items, title in (("agent_past_leases", past, "held before"), ("agent_work", body.get("work"), "work")):
        if items:
            rows(name, items, title=title)


def show(op: Operation, reply: Reply, args: argparse.Namespace, client: Client) -> int:
    """Print ``reply`` for ``op``; the exit code."""
    refused = reply.refusal()
    if getattr(args, "_json", False):
        sys.stdout.write(reply.body.decode() + "\n")
    if refused is not None:
        on_refused = getattr(args, "_on_refused", None)
        extra = on_refused(args, refused, client) if on_refused is not None else None
        fail(refused.code, refused.message, {**refused.details, **(extra or {})})
        if refused.status == 401:
            print(f"  token: {client.target.source}", file=sys.stderr)
        return exit_code(refused)
    if getattr(args, "_json", False):
        return 0
    body = reply.payload()
    if op.kind == "command":
        result = body.get("result") or {}
        field = getattr(args, "_print", None)
        if field:
            print(_cell(result.get(field)) if isinstance(result, dict) else "-")
            return 0
        summary(
            result if isinstance(result, dict) else {"result": result},
            title=f"{op.name}: done (position {body.get('position')})",
        )
        return 0
    if op.name == "get_agent":
        agent(body, client)
        return 0
    lists = [k for k, v in body.items() if isinstance(v, list)]
    if op.name == "get_code_heatmap":
        console().print(f"mode {body.get('mode')}, depth {body.get('depth')}")
    if lists:
        rows(op.name, body[lists[0]])
    else:
        summary(body)
    return 0
