"""What a hook reads first: the binding with its session and latest lease, and the session's
own claims that may cover the files a tool call writes (each by a key or an index).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, select, text

from eventcoord import liveness
from eventcoord.projections.files import live_key
from eventcoord.projections.tables import leases, sessions
from eventcoord.reads.files import PG_LIVE_KEY, ancestors
from eventcoord.store import dbclock
from eventcoord.store.prepared import Prepared
from eventcoord.store.schema import harness_sessions

_LATEST_LEASE = (
    select(leases.c.issue)
    .where((leases.c.session_id == harness_sessions.c.session_id) & leases.c.released_us.is_(None))
    .order_by(leases.c.lease_id.desc())
    .limit(1)
    .scalar_subquery()
)
#: A binding, its session's liveness and latest lease, in one statement by primary keys.
_BINDING = Prepared(
    lambda d: (
        select(
            harness_sessions.c.session_id,
            harness_sessions.c.generation,
            harness_sessions.c.previous_session_id,
            harness_sessions.c.delivered_position,
            harness_sessions.c.last_message,
            sessions.c.actor_key,
            sessions.c.last_seen_us,
            sessions.c.ended_us,
            _LATEST_LEASE,
        )
        .select_from(harness_sessions.outerjoin(sessions, sessions.c.session_id == harness_sessions.c.session_id))
        .where(
            (harness_sessions.c.workspace == bindparam("ws"))
            & (harness_sessions.c.harness == bindparam("harness"))
            & (harness_sessions.c.thread == bindparam("thread"))
        )
    )
)
#: A session's live claims whose literal prefix is one of the given ones: every claim of it
#: that can match a file whose directories (and itself) are those prefixes. Through the
#: index of live claims, as claim_files' own probes (reads/files.py), in one statement.
_OWN_OVER = Prepared(
    lambda d: text(
        "SELECT path, exclusive FROM file_claims INDEXED BY ix_file_claims_live"
        " WHERE workspace = :ws AND released_us IS NULL AND session_id = :sid"
        " AND literal_prefix IN (SELECT value FROM json_each(:prefixes))"
        if d == "sqlite"
        else f"SELECT path, exclusive FROM file_claims WHERE {PG_LIVE_KEY} = ANY(CAST(:keys AS text[]))"
        " AND session_id = :sid"
    )
)

#: On PostgreSQL, all a PreToolUse reads before it claims, in one statement: the database's
#: clock and TTL, the binding with its session and latest lease, and the paths of the
#: session's live exclusive claims whose literal prefix is one of ``:keys`` (by the index of
#: live claims). A row even without a binding, for the clock.
_PG_BINDING_OVER = Prepared(
    lambda d: text(
        "SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint,"
        " (SELECT value FROM settings WHERE key = 'ttl_seconds'),"
        " h.session_id, h.generation, h.previous_session_id, h.delivered_position, h.last_message,"
        " s.actor_key, s.last_seen_us, s.ended_us,"
        " (SELECT l.issue FROM leases AS l WHERE l.session_id = h.session_id AND l.released_us IS NULL"
        " ORDER BY l.lease_id DESC LIMIT 1),"
        f" ARRAY(SELECT path FROM file_claims WHERE {PG_LIVE_KEY} = ANY(CAST(:keys AS text[]))"
        " AND file_claims.session_id = h.session_id AND exclusive)"
        " FROM (SELECT 1) AS one"
        " LEFT JOIN harness_sessions AS h ON h.workspace = :ws AND h.harness = :harness AND h.thread = :thread"
        " LEFT JOIN sessions AS s ON s.session_id = h.session_id"
    )
)


@dataclass(frozen=True, slots=True)
class BindingRow:
    """A binding as stored, with its session's liveness (None: the session row is missing)."""

    session_id: str
    generation: int
    previous_session_id: str | None
    delivered_position: int
    last_message: str | None
    actor_key: str | None
    last_seen_us: int | None
    ended_us: int | None
    lease_issue: str | None = None


@dataclass(frozen=True, slots=True)
class Seen:
    """One read of a binding, by the database's clock."""

    row: BindingRow | None
    now_us: int
    ttl_seconds: int

    @property
    def live(self) -> bool:
        """The bound session is live now."""
        r = self.row
        cutoff = liveness.cutoff(self.now_us, self.ttl_seconds)
        return r is not None and liveness.is_live(r.last_seen_us, r.ended_us, cutoff)


def binding(conn: Connection, workspace: str, harness: str, thread: str) -> Seen:
    """The binding of (``workspace``, ``harness``, ``thread``) and the database's clock."""
    now_us, ttl = dbclock.read(conn)
    r = _BINDING.first(conn, {"ws": workspace, "harness": harness, "thread": thread})
    return Seen(BindingRow(*r) if r is not None else None, now_us, ttl)


@dataclass(frozen=True, slots=True)
class OwnClaim:
    """A live claim of the session that may cover a file it is about to write."""

    path: str
    exclusive: bool


def own_claims_over(conn: Connection, workspace: str, session_id: str, files: Sequence[str]) -> list[OwnClaim]:
    """The session's live claims that could match one of ``files`` (plain file paths)."""
    prefixes = _prefixes(files)
    if conn.dialect.name == "sqlite":
        params: dict[str, Any] = {"ws": workspace, "sid": session_id, "prefixes": json.dumps(prefixes)}
    else:
        params = {"sid": session_id, "keys": [live_key(workspace, p) for p in prefixes]}
    return [OwnClaim(r[0], bool(r[1])) for r in _OWN_OVER.rows(conn, params)]


def binding_over(
    conn: Connection, workspace: str, harness: str, thread: str, files: Sequence[str]
) -> tuple[Seen, list[str]]:
    """The binding (as :func:`binding`) and the patterns of its session's live exclusive claims
    that could match one of ``files``; on PostgreSQL in one statement (``EventStore.query_one``)."""
    if conn.dialect.name != "postgresql":
        seen = binding(conn, workspace, harness, thread)
        if seen.row is None or not seen.live:
            return seen, []
        own = own_claims_over(conn, workspace, seen.row.session_id, files)
        return seen, [c.path for c in own if c.exclusive]
    keys = [live_key(workspace, p) for p in _prefixes(files)]
    r = _PG_BINDING_OVER.first(conn, {"ws": workspace, "harness": harness, "thread": thread, "keys": keys})
    assert r is not None  # one row, bound or not
    row = BindingRow(*r[2:11]) if r[2] is not None else None
    seen = Seen(row, int(r[0]), int(r[1]))
    return seen, list(r[11]) if row is not None and seen.live else []


def _prefixes(files: Sequence[str]) -> list[str]:
    """The literal prefixes a claim matching one of ``files`` may have: each file and its directories."""
    return sorted({p for f in files for p in (*ancestors(f), f)})
