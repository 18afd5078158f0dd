"""State loading shared by handlers: reads of the inline read models, with row locks.

On PostgreSQL ``FOR UPDATE`` serialises the commands that depend on the same row; on
SQLite the single writer already serialises everything and the clause renders to nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, false, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import BindParameter

from eventcoord.auth import authorize_session
from eventcoord.context import Context
from eventcoord.domain.sessions import SessionState
from eventcoord.projections.tables import sessions
from eventcoord.store.postgres import held_locks, session_rows
from eventcoord.store.postgres.held_locks import GuardLock
from eventcoord.store.postgres.session_rows import SessionRead
from eventcoord.store.prepared import Prepared, unindexed
from eventcoord.store.schema import guards

#: The workspace parameter, named the same way by every prepared statement of the handlers.
WS: BindParameter[str] = bindparam("ws")
_KEY: BindParameter[str] = bindparam("key")

SESSION_COLUMNS = (
    sessions.c.session_id,
    sessions.c.actor_key,
    sessions.c.kind,
    sessions.c.stable,
    sessions.c.identity_source,
    sessions.c.host,
    sessions.c.last_seen_us,
    sessions.c.ended_us,
    sessions.c.working_on,
    sessions.c.token_id,
)


def _session_by_id(lock: bool) -> Prepared:
    # By its key only: the workspace is checked, not searched by. With ``workspace = $2`` the
    # generic plan PostgreSQL made on an empty table read the session through
    # ix_sessions_registered (workspace, registered_us, session_id): every session of the
    # workspace, for every command (0011_one_index_each's rule; test_plans.py).
    stmt = select(*SESSION_COLUMNS).where(
        (sessions.c.session_id == bindparam("sid")) & (unindexed(sessions.c.workspace) == bindparam("ws"))
    )
    return Prepared(lambda d: stmt.with_for_update() if lock else stmt, session_row="sid")


_SESSION = _session_by_id(lock=False)
_SESSION_FOR_UPDATE = _session_by_id(lock=True)
#: The rows ``_SESSION_FOR_UPDATE`` reads, of many sessions at once (``ws`` and ``sid`` in
#: pairs), each after its workspace, locked, skipping any another transaction holds:
#: PostgreSQL's read ahead for a batch (``store/postgres/session_rows.py``).
_SESSIONS_AHEAD = Prepared(
    lambda d: text(
        f"SELECT workspace, {', '.join(c.name for c in SESSION_COLUMNS)} FROM sessions"
        " WHERE (workspace, session_id) IN (SELECT * FROM unnest(CAST(:ws AS text[]), CAST(:sid AS text[])))"
        " ORDER BY session_id FOR UPDATE SKIP LOCKED"
    )
)


def session_read_ahead(workspace: str, session_id: str) -> SessionRead:
    """What a command that first loads its session locked (``load_session(lock=True)``) can
    have read ahead by a PostgreSQL batch."""
    return SessionRead(_SESSIONS_AHEAD, workspace, session_id)


def load_session(
    conn: Connection, ctx: Context, session_id: str, *, lock: bool = False, own: bool = True
) -> SessionState | None:
    """One session of the caller's workspace (None if absent or in another workspace).

    With ``own`` (the default: the session the command names to act as), a session
    registered under another token is 403 FORBIDDEN unless the caller is an admin;
    ``own=False`` loads someone else's session (a holder, a message's target, a worker).
    """
    row = session_rows.read(conn, _SESSIONS_AHEAD, ctx.workspace, session_id) if lock else None
    if row is None:
        row = (_SESSION_FOR_UPDATE if lock else _SESSION).first(conn, {"sid": session_id, "ws": ctx.workspace})
    if row is None:
        return None
    return own_session(ctx, row) if own else SessionState(*row)


def own_session(ctx: Context, row: Sequence[Any]) -> SessionState:
    """The session the command acts as, from a row of ``SESSION_COLUMNS``: 403 FORBIDDEN if it
    was registered under another token and the caller is not an admin (docs/protocol.md#roles)."""
    session = SessionState(*row)
    authorize_session(ctx.caller, session.session_id, session.token_id)
    return session


_SESSION_LOCKING_GUARD = Prepared(
    lambda d: (
        select(*SESSION_COLUMNS)
        .where((sessions.c.session_id == bindparam("sid")) & (sessions.c.workspace == bindparam("ws")))
        .add_cte(guard_upsert().cte("guard"))
    ),
    session_row="sid",
)


def load_session_and_lock_guard(conn: Connection, ctx: Context, session_id: str, key: str) -> SessionState | None:
    """The caller's session (as :func:`load_session`), and the guard ``key`` locked until commit.

    On PostgreSQL one statement does both (a data-modifying CTE): the session is read in
    the statement's snapshot, taken before the lock was granted, as it would be read by a
    statement of its own before the lock. A guard row it inserts is not counted as a write
    of the batch, so a refusal after it keeps that row (harmless: a lock row, in no read
    model) rather than rolling the batch back.
    """
    lock = held_locks.guard(ctx.workspace, key)
    if conn.dialect.name != "postgresql" or held_locks.held(conn, lock):
        session = load_session(conn, ctx, session_id)
        lock_guard(conn, ctx.workspace, key)
        return session
    row = _SESSION_LOCKING_GUARD.first(conn, {"sid": session_id, "ws": ctx.workspace, "key": key})
    held_locks.hold(conn, lock)
    return None if row is None else own_session(ctx, row)


def load_sessions(conn: Connection, ctx: Context, session_ids: set[str]) -> dict[str, SessionState]:
    """Several sessions by id (holders of leases or claims), without locking them."""
    found: dict[str, SessionState] = {}
    for sid in sorted(session_ids):  # a few holders: one prebuilt probe each
        row = _SESSION.first(conn, {"sid": sid, "ws": ctx.workspace})
        if row is not None:
            found[sid] = SessionState(*row)
    return found


def guard_upsert() -> postgresql.Insert:
    """PostgreSQL: insert the guard row ``(ws, key)`` or lock it, writing nothing if it exists."""
    insert = postgresql.insert(guards).values(workspace=WS, key=_KEY)
    return insert.on_conflict_do_update(
        index_elements=[guards.c.workspace, guards.c.key], set_={"key": insert.excluded.key}, where=false()
    )


#: PostgreSQL: the guard row inserted, or the existing one locked, in one statement (``ON
#: CONFLICT DO UPDATE … WHERE false`` locks the conflicting row at FOR UPDATE strength and
#: writes nothing; a row it inserts is ours until commit). SQLite takes no guard.
_LOCK_GUARD = Prepared(lambda d: guard_upsert())


def lock_guard(conn: Connection, workspace: str, key: str) -> None:
    """Lock (creating it if missing) the guard row ``key`` of a workspace until commit.

    A PostgreSQL batch's fast pass that holds it already sends nothing (``held_locks``).
    """
    if conn.dialect.name == "sqlite":
        # SQLite's one writer (BEGIN IMMEDIATE, in every process on the file) serialises
        # every decision already: a guard row would lock nothing more, so none is written.
        return
    lock = held_locks.guard(workspace, key)
    if held_locks.held(conn, lock):
        return
    _LOCK_GUARD.run(conn, {"ws": workspace, "key": key})
    held_locks.hold(conn, lock)


#: PostgreSQL: many guard rows (``ws`` and ``key`` in pairs) locked at once for a batch, in
#: key order: the missing ones inserted (ours until commit), the existing ones locked,
#: skipping any another transaction holds. Its rows are the guards it holds afterwards
#: (the main query does not see the rows its CTE inserts: one snapshot).
_GUARDS_AHEAD = Prepared(
    lambda d: text(
        "WITH wanted AS (SELECT * FROM unnest(CAST(:ws AS text[]), CAST(:key AS text[])) AS w(workspace, key)),"
        " inserted AS (INSERT INTO guards (workspace, key) SELECT workspace, key FROM wanted"
        " ORDER BY workspace, key ON CONFLICT DO NOTHING RETURNING workspace, key)"
        " SELECT workspace, key FROM inserted UNION ALL SELECT g.workspace, g.key FROM wanted AS w"
        # each guard by its key (a lateral probe the planner may not turn into a join that
        # reads every guard), in key order
        " CROSS JOIN LATERAL (SELECT workspace, key FROM guards"
        " WHERE guards.workspace = w.workspace AND guards.key = w.key OFFSET 0 FOR UPDATE SKIP LOCKED) AS g"
    ),
    writes="guards",
)


def guard_lock_ahead(workspace: str, key: str) -> GuardLock:
    """What a command that first locks a guard (``load_session_and_lock_guard``) can have
    locked ahead by a PostgreSQL batch."""
    return GuardLock(_GUARDS_AHEAD, workspace, key)
