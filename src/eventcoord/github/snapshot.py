"""Reading eventcoord for a sync, through the typed client: its memory, leases, queue, live
sessions, and the leases that ended expired or superseded since the memory's cursor."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import msgspec

from eventcoord.client import Client
from eventcoord.codec import WireEvent
from eventcoord.github import memory as mem
from eventcoord.github.model import Coordination, GitHubIssue, Holder, Lease, Scope, Takeover
from eventcoord.github.plan import wants_detail

PAGE = 1000
#: Reasons a lease ends that the audit trail reports.
AUDITED_REASONS = frozenset({"expired", "superseded"})


def _data(event: WireEvent) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.json.decode(event.data)
    return data


def read_memory(client: Client, channel: str, start: mem.Memory) -> mem.Memory:
    """The memory after the records posted since ``start`` was read."""
    memory, after = start, start.read_to
    while True:
        page = client.read_messages(channel=channel, after=after, limit=PAGE).messages
        for m in page:
            record = mem.decode(m.body) if mem.trusted(m.session_id, m.actor_key) else None
            if record is not None:
                memory = mem.apply(memory, record, m.position)
            after = m.position
        if len(page) < PAGE:
            return replace(memory, read_to=after)


def _queued(client: Client, project: str | None) -> dict[str, str]:
    """Issue keys with a work item queued or claimed, and the item's project."""
    out: dict[str, str] = {}
    for status in ("queued", "claimed"):
        after = 0
        while True:
            items = client.list_queue(project=project, status=status, after=after, limit=PAGE).items
            out.update({i.issue: i.project for i in items if i.issue})
            if len(items) < PAGE or not items[-1].history:
                break
            after = int(items[-1].history[0]["position"])
    return out


def _released(client: Client, after: int) -> tuple[list[tuple[WireEvent, dict[str, Any]]], int, int]:
    """The releases after ``after`` that the audit trail reports, the last release read and
    how many were read."""
    found: list[tuple[WireEvent, dict[str, Any]]] = []
    last, count = after, 0
    while True:
        page = client.read_events(after=last, type=["LeaseReleased"], limit=PAGE).events
        for e in page:
            data = _data(e)
            if data.get("reason") in AUDITED_REASONS:
                found.append((e, data))
        if page:
            last, count = page[-1].position, count + len(page)
        if len(page) < PAGE:
            return found, last, count


def _issue_history(client: Client, issue: str, past: int) -> list[WireEvent]:
    """The grants and handoff notes of one issue, at least up to the first one after ``past``."""
    out: list[WireEvent] = []
    cursor = 0
    while True:
        page = client.read_events(
            after=cursor, stream=f"issue:{issue}", type=["LeaseGranted", "HandoffNoted"], limit=PAGE
        ).events
        out += page
        if len(page) < PAGE or page[-1].position > past:
            return out
        cursor = page[-1].position


def _detail(client: Client, t: Takeover, released: WireEvent) -> Takeover:
    """``t`` with the previous holder's actor, the grant that followed it and the handoff note."""
    granted: dict[str, Any] = {}
    note: str | None = None
    after: Holder | None = None
    for e in _issue_history(client, t.issue, t.position):
        data = _data(e)
        if e.position < t.position:
            if e.type == "LeaseGranted" and data.get("fencing_token") == t.before.fencing_token:
                granted, note = data, None
            elif e.type == "HandoffNoted":
                note = data.get("note") or note
        elif e.type == "LeaseGranted":
            # The grant made by the same command shares its moment; a later one is no takeover.
            if e.recorded_at == released.recorded_at:
                after = Holder(data["session_id"], int(data["fencing_token"]), data.get("actor_key"))
            break
    before = replace(t.before, actor_key=granted.get("actor_key"))
    return replace(t, before=before, after=after, handoff_note=note, project=t.project or granted.get("project"))


def takeovers(
    client: Client, scope: Scope, memory: mem.Memory, github: Mapping[int, GitHubIssue]
) -> tuple[tuple[Takeover, ...], int, int]:
    """The leases that ended expired or superseded after the cursor (detailed where the plan
    comments on them), the position of the last release read and how many were read."""
    found, last, count = _released(client, memory.cursor)
    out = []
    for event, data in found:
        t = Takeover(
            position=event.position,
            issue=data["issue"],
            project=data.get("project"),
            reason=data["reason"],
            before=Holder(data["session_id"], int(data.get("fencing_token") or 0)),
        )
        out.append(_detail(client, t, event) if wants_detail(t, github, memory, scope) else t)
    return tuple(out), last, count


def read_coordination(
    client: Client, scope: Scope, memory: mem.Memory, github: Mapping[int, GitHubIssue]
) -> Coordination:
    """What eventcoord says now, within the sync's scope."""
    leases = tuple(
        Lease(
            issue=x.issue,
            project=x.project,
            session_id=x.session_id,
            actor_key=x.actor_key,
            fencing_token=x.fencing_token,
            live=x.live,
            kind=x.kind or "agent",
        )
        for x in client.list_leases(project=scope.project).leases
    )
    agents = client.list_agents(live=True, limit=10000).agents
    ended, last, count = takeovers(client, scope, memory, github)
    return Coordination(
        leases=leases,
        queued=_queued(client, scope.project),
        live_actors=frozenset(a.actor_key for a in agents),
        declared=frozenset(a.working_on for a in agents if a.working_on),
        takeovers=ended,
        released_to=last,
        releases_read=count,
    )
