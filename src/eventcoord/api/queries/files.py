"""Reads of file claims: live claims, the conflict log, the heatmap."""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

import msgspec
from sqlalchemy import Connection, Select, Table, func, select

from eventcoord.api.queries.common import read_clock, under
from eventcoord.codec import format_time
from eventcoord.history import snapshots
from eventcoord.liveness import is_live
from eventcoord.projections.tables import conflicts, file_claims, sessions

HeatmapMode = Literal["claims", "contention"]
#: A position past every event: the newest snapshot.
NEWEST = 2**63 - 1


class Bucket(msgspec.Struct, frozen=True):
    """One heatmap cell: a path prefix of ``depth`` segments and how often it was hit.

    ``leaf``: every path counted in it ends there (a file, or a pattern's last segment), so
    there is nothing below it to drill into; a directory claim or a deeper path makes it a folder.
    """

    prefix: str
    count: int
    leaf: bool = False


def bucket_of(path: str, depth: int) -> str:
    """The first ``depth`` segments of a claimed path, verbatim (``src/`` is ``src``)."""
    return "/".join([s for s in path.split("/") if s][:depth])


def ends_at_bucket(path: str, depth: int) -> bool:
    """Whether ``path`` is all of its bucket: no trailing ``/`` and at most ``depth`` segments."""
    return not path.endswith("/") and len([s for s in path.split("/") if s]) <= depth


class _Tally:
    """Counts per bucket, and the buckets some counted path goes below (folders)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.counts: Counter[str] = Counter()
        self.folders: set[str] = set()

    def add(self, path: str, n: int) -> None:
        bucket = bucket_of(path, self.depth)
        self.counts[bucket] += n
        if not ends_at_bucket(path, self.depth):
            self.folders.add(bucket)

    def ranked(self, limit: int | None) -> list[Bucket]:
        """Most first, ties by prefix."""
        ranked = sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return [Bucket(p, n, p not in self.folders) for p, n in ranked[:limit]]


#: The read-model tables :func:`live_claims` reads.
LIVE_CLAIMS_TABLES = (file_claims, sessions)


def heatmap_buckets(
    conn: Connection,
    workspace: str,
    mode: HeatmapMode,
    since_us: int | None,
    until_us: int | None,
    prefix: str = "",
    depth: int = 1,
    limit: int | None = None,
    upto: int | None = None,
) -> list[Bucket]:
    """Counts per path prefix in ``[since, until)``, most first (ties by prefix).

    The database counts per distinct path inside the indexed time window; the few
    distinct paths are folded into buckets here. All time, the counts start from the newest
    snapshot's (``snapshots.path_hits``) and only the rows since are counted. ``upto``: as
    of that position (docs/protocol.md#history).
    Both tables are keyed by the position of the event that made the row, and what they
    count (path, time) never changes, so their rows up to a position are exactly what the
    read model held then: no replay.
    """
    table, at = (file_claims, file_claims.c.claimed_us) if mode == "claims" else (conflicts, conflicts.c.occurred_us)
    tally = _Tally(depth)
    if since_us is None and until_us is None:
        # All time: the newest snapshot's counts, and the rows since it (history's snapshots
        # keep them), so the cost follows the paths and the events since, not every claim.
        counted = snapshots.path_hits(conn, workspace, mode, NEWEST if upto is None else upto)
        if counted is not None:
            base, hits = counted
            for path, n in hits.items():
                if _under(path, prefix):
                    tally.add(path, n)
            for ws, path in conn.execute(rows_since(table, base, upto)):
                if ws == workspace and _under(path, prefix):
                    tally.add(path, 1)
            return tally.ranked(limit)
    where = table.c.workspace == workspace
    if upto is not None:
        where = where & (table.c.position <= upto)
    if since_us is not None:
        where = where & (at >= since_us)
    if until_us is not None:
        where = where & (at < until_us)
    if prefix:
        where = where & under(conn, table.c.path, prefix)
    for path, n in conn.execute(select(table.c.path, func.count()).where(where).group_by(table.c.path)):
        tally.add(path, int(n))
    return tally.ranked(limit)


def _under(path: str, prefix: str) -> bool:
    """What :func:`~eventcoord.api.queries.common.under` selects, for a path in hand."""
    return not prefix or path == prefix or path.startswith(prefix + "/")


def rows_since(table: Table, after: int, upto: int | None) -> Select[Any]:
    """``(workspace, path)`` of ``table``'s rows made after position ``after`` (up to ``upto``).

    A range of the primary key, nothing else: with a workspace term the planners would walk a
    workspace index (every row of the workspace) to group by path. The caller filters.
    """
    stmt = select(table.c.workspace, table.c.path).where(table.c.position > after)
    return stmt if upto is None else stmt.where(table.c.position <= upto)


def live_claims(
    conn: Connection, workspace: str, issue: str | None, session_id: str | None, prefix: str, limit: int
) -> list[dict[str, Any]]:
    """Unreleased claims, oldest first, with the holder's liveness computed now."""
    _, cutoff = read_clock(conn)
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
            "live": r.session_id is None or is_live(r.last_seen_us, r.ended_us, cutoff),
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
