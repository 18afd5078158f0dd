"""Read routes of the files tier: live file claims, the conflict log, the heatmap, messages.

Each route authenticates, validates its query (422 VALIDATION naming the field) and runs
one query function over a synchronous connection; ``heatmap_buckets`` is also what
``bench/heatmap.py`` times.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Annotated, Any, Literal

import msgspec
from litestar import Request, Response, get
from litestar.params import Parameter
from sqlalchemy import ColumnElement, Connection, func, select

from eventcoord.api.deps import caller, runtime
from eventcoord.api.reads import json
from eventcoord.codec import format_time, parse_time
from eventcoord.domain.paths import PathError, normalise_path
from eventcoord.errors import DomainError, ValidationFailed
from eventcoord.handlers.files import starts_with
from eventcoord.projections.tables import conflicts, file_claims, messages, sessions
from eventcoord.sanitize import CHANNEL_PATTERN
from eventcoord.store import log

HeatmapMode = Literal["claims", "contention"]
_CHANNEL = re.compile(CHANNEL_PATTERN)


class Bucket(msgspec.Struct, frozen=True):
    """One heatmap cell: a path prefix of ``depth`` segments and how often it was hit."""

    prefix: str
    count: int


# --- query parameters -----------------------------------------------------------------


def parse_window(since: str | None, until: str | None) -> tuple[int | None, int | None]:
    """RFC 3339 ``since``/``until`` to microseconds; a bad one is 422 naming it."""
    out: list[int | None] = []
    for name, value in (("since", since), ("until", until)):
        if value is None or value == "":
            out.append(None)
            continue
        try:
            out.append(parse_time(value))
        except (ValueError, OverflowError):
            raise ValidationFailed(name, f"{name} must be an RFC 3339 time, got {value!r}") from None
    return out[0], out[1]


def parse_prefix(value: str | None) -> str:
    """A path prefix, normalised; ``''`` means everything. Trailing ``/`` is optional."""
    if value is None or value.strip("/") == "":
        return ""
    try:
        return normalise_path(value).rstrip("/")
    except PathError as e:
        raise DomainError("VALIDATION", f"prefix: {e}", {"field": "prefix", "reason": e.reason}) from None


def under(conn: Connection, column: Any, prefix: str) -> ColumnElement[bool]:
    """Paths at or below ``prefix``, by whole segments: ``src`` takes ``src``, ``src/…``."""
    cond: ColumnElement[bool] = (column == prefix) | starts_with(conn, column, prefix + "/")
    return cond


def bucket_of(path: str, depth: int) -> str:
    """The first ``depth`` segments of a claimed path, verbatim (``src/`` is ``src``)."""
    return "/".join([s for s in path.split("/") if s][:depth])


# --- query functions ------------------------------------------------------------------


def heatmap_buckets(
    conn: Connection,
    workspace: str,
    mode: HeatmapMode,
    since_us: int | None,
    until_us: int | None,
    prefix: str = "",
    depth: int = 1,
    limit: int | None = None,
) -> list[Bucket]:
    """Counts per path prefix in ``[since, until)``, most first (ties by prefix).

    The database counts per distinct path inside the indexed time window; the few
    distinct paths are folded into buckets here.
    """
    table, at = (file_claims, file_claims.c.claimed_us) if mode == "claims" else (conflicts, conflicts.c.occurred_us)
    where = table.c.workspace == workspace
    if since_us is not None:
        where = where & (at >= since_us)
    if until_us is not None:
        where = where & (at < until_us)
    if prefix:
        where = where & under(conn, table.c.path, prefix)
    counts: Counter[str] = Counter()
    for path, n in conn.execute(select(table.c.path, func.count()).where(where).group_by(table.c.path)):
        counts[bucket_of(path, depth)] += int(n)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [Bucket(p, n) for p, n in ranked[:limit]]


def live_claims(
    conn: Connection, workspace: str, issue: str | None, session_id: str | None, prefix: str, limit: int
) -> list[dict[str, Any]]:
    """Unreleased claims, oldest first, with the holder's liveness computed now."""
    now_us, ttl = log.clock(conn)
    cutoff = now_us - ttl * 1_000_000
    where = (file_claims.c.workspace == workspace) & file_claims.c.released_us.is_(None)
    if issue is not None:
        where = where & (file_claims.c.issue == issue)
    if session_id is not None:
        where = where & (file_claims.c.session_id == session_id)
    if prefix:
        where = where & under(conn, file_claims.c.path, prefix)
    stmt = (
        select(file_claims, sessions.c.last_seen_us, sessions.c.ended_us)
        .select_from(file_claims.outerjoin(sessions, sessions.c.session_id == file_claims.c.session_id))
        .where(where)
        .order_by(file_claims.c.position, file_claims.c.idx)
        .limit(limit)
    )
    return [
        {
            "path": r.path,
            "issue": r.issue,
            "session_id": r.session_id,
            "actor_key": r.actor_key,
            "exclusive": r.exclusive,
            # A claim without a session has no liveness: it is held until forced.
            "live": r.session_id is None or (r.ended_us is None and r.last_seen_us is not None and r.last_seen_us > cutoff),
            "claimed_at": format_time(r.claimed_us),
            "position": r.position,
        }
        for r in conn.execute(stmt)
    ]


def conflict_log(
    conn: Connection,
    workspace: str,
    since_us: int | None,
    until_us: int | None,
    prefix: str,
    after: int,
    limit: int,
    before: int | None = None,
) -> list[dict[str, Any]]:
    """ClaimConflict rows in position order, within the window and under the prefix.

    With ``before``, the *last* ``limit`` rows below that position (still in position
    order): the newest page of the feed, or the feed as of a moment.
    """
    where = (conflicts.c.workspace == workspace) & (conflicts.c.position > after)
    if before is not None:
        where = where & (conflicts.c.position < before)
    if since_us is not None:
        where = where & (conflicts.c.occurred_us >= since_us)
    if until_us is not None:
        where = where & (conflicts.c.occurred_us < until_us)
    if prefix:
        where = where & under(conn, conflicts.c.path, prefix)
    if before is not None:
        newest = select(conflicts).where(where).order_by(conflicts.c.position.desc()).limit(limit)
        rows = sorted(conn.execute(newest), key=lambda r: r.position)
    else:
        rows = list(conn.execute(select(conflicts).where(where).order_by(conflicts.c.position).limit(limit)))
    return [
        {
            "position": r.position,
            "path": r.path,
            "issue": r.issue,
            "session_id": r.session_id,
            "holder_path": r.holder_path,
            "holder_issue": r.holder_issue,
            "holder_session_id": r.holder_session_id,
            "forced": r.forced,
            "actor_key": r.actor_key,
            "holder_actor_key": r.holder_actor_key,
            "occurred_at": format_time(r.occurred_us),
        }
        for r in rows
    ]


def channel_messages(conn: Connection, workspace: str, channel: str, after: int, limit: int) -> list[dict[str, Any]]:
    """Messages of one channel with position > ``after``, in order."""
    rows = conn.execute(
        select(messages)
        .where((messages.c.workspace == workspace) & (messages.c.channel == channel) & (messages.c.position > after))
        .order_by(messages.c.position)
        .limit(limit)
    )
    return [
        {
            "position": r.position,
            "channel": r.channel,
            "body": r.body,
            "session_id": r.session_id,
            "actor_key": r.actor_key,
            "recorded_at": format_time(r.recorded_us),
        }
        for r in rows
    ]


# --- routes ---------------------------------------------------------------------------

Req = Request[Any, Any, Any]


@get("/v1/file-claims", operation_id="listFileClaims", summary="Unreleased file claims")
async def list_file_claims(
    request: Req,
    issue: Annotated[str | None, Parameter(description="only claims of this issue")] = None,
    session_id: Annotated[str | None, Parameter(description="only claims held by this session")] = None,
    session: Annotated[str | None, Parameter(description="alias of session_id")] = None,
    prefix: Annotated[str | None, Parameter(description="only paths at or below this prefix")] = None,
    limit: Annotated[int, Parameter(ge=1, le=10000)] = 1000,
) -> Response[bytes]:
    """``{"file_claims": [...]}``: unreleased claims of the workspace, oldest first.

    ``live`` is computed at read time; a claim without a session is always ``live`` (it
    never expires and yields only to force).
    """
    who = await caller(request)
    pre = parse_prefix(prefix)
    sid = session_id if session_id is not None else session
    rows = await runtime(request).store.query(lambda c: live_claims(c, who.workspace, issue, sid, pre, limit))
    return json({"file_claims": rows})


@get("/v1/conflicts", operation_id="listConflicts", summary="The conflict log")
async def list_conflicts(
    request: Req,
    since: Annotated[str | None, Parameter(description="RFC 3339, inclusive")] = None,
    until: Annotated[str | None, Parameter(description="RFC 3339, exclusive")] = None,
    prefix: Annotated[str | None, Parameter(description="only requested paths at or below this prefix")] = None,
    after: Annotated[int, Parameter(ge=0, description="exclusive position cursor")] = 0,
    limit: Annotated[int, Parameter(ge=1, description="page size, clamped to 1000")] = 100,
    before: Annotated[int | None, Parameter(ge=1, le=2**63 - 1, description="exclusive upper position: the last `limit` below it")] = None,
) -> Response[bytes]:
    """``{"conflicts": [...]}``: every contended path, rejected or forced, in position order.

    ``before`` pages backwards: the newest ``limit`` conflicts with a smaller position.
    """
    who = await caller(request)
    since_us, until_us = parse_window(since, until)
    pre = parse_prefix(prefix)
    rows = await runtime(request).store.query(
        lambda c: conflict_log(c, who.workspace, since_us, until_us, pre, after, min(limit, 1000), before)
    )
    return json({"conflicts": rows})


@get("/v1/heatmap", operation_id="codeHeatmap", summary="Claims or contention per path prefix")
async def heatmap(
    request: Req,
    mode: Annotated[str, Parameter(description="claims (work) or contention (collisions)")] = "claims",
    since: Annotated[str | None, Parameter(description="RFC 3339, inclusive; default all time")] = None,
    until: Annotated[str | None, Parameter(description="RFC 3339, exclusive; default all time")] = None,
    prefix: Annotated[str | None, Parameter(description="drill down: only paths at or below this prefix")] = None,
    depth: Annotated[int, Parameter(ge=1, le=64, description="path segments per bucket")] = 1,
    limit: Annotated[int, Parameter(ge=1, le=10000, description="at most this many buckets")] = 1000,
) -> Response[bytes]:
    """``{mode, buckets: [{prefix, count}]}`` sorted by count, descending.

    Claims mode counts claimed paths recorded in ``[since, until)``; contention mode counts
    ClaimConflict events. A bucket is the first ``depth`` segments of the path, verbatim.
    """
    who = await caller(request)
    if mode not in ("claims", "contention"):
        raise ValidationFailed("mode", f"mode must be 'claims' or 'contention', got {mode!r}")
    since_us, until_us = parse_window(since, until)
    pre = parse_prefix(prefix)
    m: HeatmapMode = "claims" if mode == "claims" else "contention"
    buckets = await runtime(request).store.query(
        lambda c: heatmap_buckets(c, who.workspace, m, since_us, until_us, pre, depth, limit)
    )
    return json({"mode": m, "depth": depth, "prefix": pre, "buckets": buckets})


@get("/v1/messages", operation_id="listMessages", summary="Messages of one channel, in order")
async def list_messages(
    request: Req,
    channel: Annotated[str | None, Parameter(description="issue:<key>, agent:<session_id> or project:<key>")] = None,
    after: Annotated[int, Parameter(ge=0, description="exclusive position cursor")] = 0,
    limit: Annotated[int, Parameter(ge=1, description="page size, clamped to 1000")] = 100,
) -> Response[bytes]:
    """``{"messages": [{position, channel, body, session_id, actor_key, recorded_at}]}``."""
    who = await caller(request)
    if channel is None or not _CHANNEL.match(channel):
        raise ValidationFailed("channel", "channel must be issue:<key>, agent:<session_id> or project:<key>")
    rows = await runtime(request).store.query(
        lambda c: channel_messages(c, who.workspace, channel, after, min(limit, 1000))
    )
    return json({"messages": rows})


ROUTES = [list_file_claims, list_conflicts, heatmap, list_messages]
