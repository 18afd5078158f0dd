"""What the hooks read: the binding with its session, what the session holds, what others hold.

Plain reads of the read models and of ``harness_sessions``, each by a key or an index:
none of them walks the workspace's history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, select, text

from eventcoord import liveness
from eventcoord.codec import decode_event
from eventcoord.events import FileClaimReleased, LeaseReleased
from eventcoord.handlers.files import PG_LIVE_KEY, ancestors
from eventcoord.projections.files import live_key
from eventcoord.projections.tables import file_claims, issues, leases, messages, sessions
from eventcoord.store import dbclock, log
from eventcoord.store.prepared import Prepared
from eventcoord.store.schema import events, harness_sessions

#: The session's most recently granted live lease (the issue a hook's claims go under).
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
#: index of live claims, as claim_files' own probes (handlers/files.py), in one statement.
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
    prefixes = sorted({p for f in files for p in (*ancestors(f), f)})
    if conn.dialect.name == "sqlite":
        params: dict[str, Any] = {"ws": workspace, "sid": session_id, "prefixes": json.dumps(prefixes)}
    else:
        params = {"sid": session_id, "keys": [live_key(workspace, p) for p in prefixes]}
    return [OwnClaim(r[0], bool(r[1])) for r in _OWN_OVER.rows(conn, params)]


# --- what a SessionStart tells ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Peer:
    """Another live session and what it holds."""

    session_id: str
    actor_key: str
    runtime: str | None
    host: str | None
    issues: list[str]
    paths: list[str]


@dataclass(frozen=True, slots=True)
class Note:
    """A handoff note left on an issue nobody live holds now."""

    issue: str
    note: str
    actor_key: str | None
    own: bool  # left by a session of the same actor


@dataclass(frozen=True, slots=True)
class Message:
    """A message on a session's own channel."""

    position: int
    body: str
    actor_key: str | None
    session_id: str | None


@dataclass(frozen=True, slots=True)
class Release:
    """A lease or file claim of the session that someone else ended: superseded or reclaimed."""

    position: int
    kind: str  # "lease" or "files"
    issue: str
    paths: list[str]
    reason: str
    by_session_id: str | None


def peers(conn: Connection, workspace: str, session_id: str, limit: int) -> list[Peer]:
    """Up to ``limit`` other live sessions, most recently seen first, with their live leases
    and file claims."""
    now_us, ttl = dbclock.read(conn)
    cutoff = liveness.cutoff(now_us, ttl)
    rows = conn.execute(
        select(sessions.c.session_id, sessions.c.actor_key, sessions.c.runtime, sessions.c.host)
        .where(
            (sessions.c.workspace == workspace)
            & liveness.live_clause(sessions.c.last_seen_us, sessions.c.ended_us, cutoff)
            & (sessions.c.session_id != session_id)
        )
        .order_by(sessions.c.last_seen_us.desc())
        .limit(limit)
    ).all()
    ids = [r.session_id for r in rows]
    held: dict[str, list[str]] = {sid: [] for sid in ids}
    claimed: dict[str, list[str]] = {sid: [] for sid in ids}
    if ids:
        for sid, issue in conn.execute(
            select(leases.c.session_id, leases.c.issue)
            .where(leases.c.session_id.in_(ids) & leases.c.released_us.is_(None))
            .order_by(leases.c.lease_id)
        ):
            held[sid].append(issue)
        for sid, path in conn.execute(
            select(file_claims.c.session_id, file_claims.c.path)
            .where(
                (file_claims.c.workspace == workspace)
                & file_claims.c.released_us.is_(None)
                & file_claims.c.session_id.in_(ids)
            )
            .order_by(file_claims.c.position, file_claims.c.idx)
        ):
            if path not in claimed[sid]:
                claimed[sid].append(path)
    return [Peer(r.session_id, r.actor_key, r.runtime, r.host, held[r.session_id], claimed[r.session_id]) for r in rows]


def resumable_notes(conn: Connection, workspace: str, actor_key: str, limit: int) -> list[Note]:
    """Handoff notes on issues nobody live holds (free, or held by a stale non-human session),
    the actor's own first."""
    now_us, ttl = dbclock.read(conn)
    cutoff = liveness.cutoff(now_us, ttl)
    noted = conn.execute(
        select(issues.c.issue, issues.c.handoff_note, sessions.c.actor_key)
        .select_from(issues.outerjoin(sessions, sessions.c.session_id == issues.c.handoff_session_id))
        .where((issues.c.workspace == workspace) & issues.c.handoff_note.is_not(None))
        .limit(200)
    ).all()
    if not noted:
        return []
    holder = sessions.alias("holder")
    blocked = {
        issue
        for issue, kind, last_seen, ended in conn.execute(
            select(leases.c.issue, holder.c.kind, holder.c.last_seen_us, holder.c.ended_us)
            .select_from(leases.outerjoin(holder, holder.c.session_id == leases.c.session_id))
            .where(
                (leases.c.workspace == workspace)
                & leases.c.released_us.is_(None)
                & leases.c.issue.in_([r.issue for r in noted])
            )
        )
        if kind == "human" or liveness.is_live(last_seen, ended, cutoff)
    }
    notes = [Note(r.issue, r.handoff_note, r.actor_key, r.actor_key == actor_key) for r in noted]
    notes = [n for n in notes if n.issue not in blocked and n.note.strip()]
    notes.sort(key=lambda n: (not n.own, n.issue))
    return notes[:limit]


# --- what arrived since the last delivery ---------------------------------------------------


def head(conn: Connection) -> int:
    """The newest committed position: every position up to it is committed."""
    return log.head(conn)


def inbox(conn: Connection, workspace: str, session_ids: Sequence[str], after: int, upto: int) -> list[Message]:
    """Messages on the sessions' own channels in (``after``, ``upto``], in order (at most 100)."""
    channels = [f"agent:{sid}" for sid in session_ids]
    return [
        Message(r.position, r.body, r.actor_key, r.session_id)
        for r in conn.execute(
            select(messages.c.position, messages.c.body, messages.c.actor_key, messages.c.session_id)
            .where(
                (messages.c.workspace == workspace)
                & messages.c.channel.in_(channels)
                & (messages.c.position > after)
                & (messages.c.position <= upto)
            )
            .order_by(messages.c.position)
            .limit(100)
        )
    ]


#: Why a session's hold ended that it must be told of. An ``overridden`` file claim is not
#: here: the force that displaced it already posts a message on the session's own channel.
_TOLD = {"LeaseReleased": ("superseded", "expired"), "FileClaimReleased": ("expired",)}


def releases(conn: Connection, workspace: str, session_ids: Sequence[str], after: int, upto: int) -> list[Release]:
    """Leases and file claims of the sessions that another session ended (superseded,
    reclaimed) in (``after``, ``upto``], in order: the log's release events, by type."""
    if after >= upto:
        return []
    mentions: Any = None
    for sid in session_ids:
        clause = events.c.data.contains(f'"session_id":"{sid}"', autoescape=True)
        mentions = clause if mentions is None else mentions | clause
    out: list[Release] = []
    for position, kind, data in conn.execute(
        select(events.c.position, events.c.type, events.c.data)
        .where(
            (events.c.workspace == workspace)
            & events.c.type.in_(tuple(_TOLD))
            & (events.c.position > after)
            & (events.c.position <= upto)
            & mentions
        )
        .order_by(events.c.position)
        .limit(200)
    ):
        event = decode_event(kind, data)
        if isinstance(event, LeaseReleased) and event.session_id in session_ids and event.reason in _TOLD[kind]:
            out.append(Release(position, "lease", event.issue, [], event.reason, event.by_session_id))
        elif isinstance(event, FileClaimReleased) and event.session_id in session_ids and event.reason in _TOLD[kind]:
            out.append(Release(position, "files", event.issue, list(event.paths), event.reason, event.by_session_id))
    return out
