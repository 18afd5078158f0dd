"""Reads every concept shares: a session by id (the caller's, a holder's) and guard-row locks.

On PostgreSQL ``FOR UPDATE`` serialises the commands that depend on the same row; on
SQLite the single writer already serialises everything and the clause renders to nothing,
and no guard row is taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, false, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import BindParameter

from eventcoord.auth import authorize_session
from eventcoord.context import Context
from eventcoord.domain.sessions import SessionState
from eventcoord.projections.tables import sessions
from eventcoord.store.loaders import loader
from eventcoord.store.prepared import Prepared, unindexed
from eventcoord.store.schema import guards

#: The workspace parameter, named the same way by every prepared statement of the reads.
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


@loader
def load_session(
    conn: Connection, ctx: Context, session_id: str, *, lock: bool = False, own: bool = True
) -> SessionState | None:
    """One session of the caller's workspace (None if absent or in another workspace).

    With ``own`` (the default: the session the command names to act as), a session
    registered under another token is 403 FORBIDDEN unless the caller is an admin;
    ``own=False`` loads someone else's session (a holder, a message's target, a worker).
    """
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


@loader
def load_session_and_lock_guard(conn: Connection, ctx: Context, session_id: str, key: str) -> SessionState | None:
    """The caller's session (as :func:`load_session`), and the guard ``key`` locked until commit.

    On PostgreSQL one statement does both (a data-modifying CTE): the session is read in
    the statement's snapshot, taken before the lock was granted, as it would be read by a
    statement of its own before the lock. A guard row it inserts is not counted as a write
    of the batch, so a refusal after it keeps that row (harmless: a lock row, in no read
    model) rather than rolling the batch back.
    """
    if conn.dialect.name == "sqlite":  # no guard to lock (see lock_guard)
        return load_session(conn, ctx, session_id)
    row = _SESSION_LOCKING_GUARD.first(conn, {"sid": session_id, "ws": ctx.workspace, "key": key})
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


@loader
def lock_guard(conn: Connection, workspace: str, key: str) -> None:
    """Lock (creating it if missing) the guard row ``key`` of a workspace until commit.

    A PostgreSQL batch's fast pass that holds it already sends nothing (its substitute).
    """
    if conn.dialect.name == "sqlite":
        # SQLite's one writer (BEGIN IMMEDIATE, in every process on the file) serialises
        # every decision already: a guard row would lock nothing more, so none is written.
        return
    _LOCK_GUARD.run(conn, {"ws": workspace, "key": key})
