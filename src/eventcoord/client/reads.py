"""Reads as data: one msgspec struct per read route, its fields the route's parameters.

The same role the command structs play for writes: the typed client, the CLI and the MCP
tools are all generated from these. ``None`` means "the server's default" and is not sent.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from eventcoord.commands import Channel, Key, SessionId

Limit = Annotated[int, Meta(ge=1, le=10000)]
Cursor = Annotated[int, Meta(ge=0, le=2**63 - 1)]
Time = Annotated[str, Meta(max_length=64, description="RFC 3339, e.g. 2026-01-31T12:00:00Z")]
Prefix = Annotated[str, Meta(max_length=1024)]
AsOf = Annotated[
    str, Meta(max_length=64, description="As of a position or an RFC 3339 time (docs/protocol.md#history)")
]
Status = Literal["queued", "claimed", "running", "done", "failed", "oom_killed", "cancelled"]


class Read(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every read's parameters."""


class ListAgents(Read, frozen=True, kw_only=True):
    live: bool | None = None
    limit: Limit | None = None
    as_of: AsOf | None = None


class GetAgent(Read, frozen=True, kw_only=True):
    session_id: SessionId


class ListLeases(Read, frozen=True, kw_only=True):
    project: Key | None = None
    session: SessionId | None = None
    limit: Limit | None = None
    as_of: AsOf | None = None


class GetIssueState(Read, frozen=True, kw_only=True):
    issue: Key
    as_: SessionId | None = msgspec.field(default=None, name="as")
    as_of: AsOf | None = None


class ListFileClaims(Read, frozen=True, kw_only=True):
    issue: Key | None = None
    session_id: SessionId | None = None
    prefix: Prefix | None = None
    limit: Limit | None = None
    as_of: AsOf | None = None


class ListConflicts(Read, frozen=True, kw_only=True):
    since: Time | None = None
    until: Time | None = None
    prefix: Prefix | None = None
    after: Cursor | None = None
    limit: Limit | None = None
    before: Cursor | None = None


class GetCodeHeatmap(Read, frozen=True, kw_only=True):
    mode: Literal["claims", "contention"] | None = None
    depth: Annotated[int, Meta(ge=1, le=64)] | None = None
    prefix: Prefix | None = None
    since: Time | None = None
    until: Time | None = None
    limit: Limit | None = None
    as_of: AsOf | None = None


class ListQueue(Read, frozen=True, kw_only=True):
    project: Key | None = None
    status: Status | None = None
    after: Cursor | None = None
    limit: Limit | None = None
    as_of: AsOf | None = None


class ListNamedLeases(Read, frozen=True, kw_only=True):
    pass


class ListWaits(Read, frozen=True, kw_only=True):
    after: Annotated[str, Meta(max_length=4096, description="the `next` of the previous page")] | None = None
    limit: Limit | None = None


class ReadMessages(Read, frozen=True, kw_only=True):
    channel: Channel
    after: Cursor | None = None
    limit: Limit | None = None


class ReadEvents(Read, frozen=True, kw_only=True):
    after: Cursor | None = None
    limit: Limit | None = None
    type: list[Annotated[str, Meta(max_length=64)]] | None = None
    stream: Annotated[str, Meta(max_length=200)] | None = None
    since: Time | None = None
    until: Time | None = None
