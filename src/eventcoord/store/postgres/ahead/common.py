"""PostgreSQL's reads ahead of what every concept reads first: a guard locked, a session's row.

A batch locks the guards of its commands (``GuardLock``) and reads the locked sessions
rows they read first (``SessionRead``) in one statement each; the substitutes of
``reads/common.py``'s loaders then send nothing for a guard the batch holds, and serve a
session's row from what was read ahead while nothing in the batch wrote it since.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from eventcoord.context import Context
from eventcoord.domain.sessions import SessionState
from eventcoord.reads import common
from eventcoord.store.loaders import substitute
from eventcoord.store.postgres import held_locks, session_rows
from eventcoord.store.postgres.held_locks import GuardLock
from eventcoord.store.postgres.session_rows import SessionRead
from eventcoord.store.prepared import Prepared

#: The rows a locked ``load_session`` reads, of many sessions at once (``ws`` and ``sid`` in
#: pairs), each after its workspace, locked, skipping any another transaction holds
#: (``store/postgres/session_rows.py``).
_SESSIONS_AHEAD = Prepared(
    lambda d: text(
        f"SELECT workspace, {', '.join(c.name for c in common.SESSION_COLUMNS)} FROM sessions"
        " WHERE (workspace, session_id) IN (SELECT * FROM unnest(CAST(:ws AS text[]), CAST(:sid AS text[])))"
        " ORDER BY session_id FOR UPDATE SKIP LOCKED"
    )
)
#: Many guard rows (``ws`` and ``key`` in pairs) locked at once for a batch, in key order:
#: the missing ones inserted (ours until commit), the existing ones locked, skipping any
#: another transaction holds. Its rows are the guards it holds afterwards (the main query
#: does not see the rows its CTE inserts: one snapshot).
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


def session_read_ahead(workspace: str, session_id: str) -> SessionRead:
    """What a command that first loads its session locked (``load_session(lock=True)``) can
    have read ahead by a batch."""
    return SessionRead(_SESSIONS_AHEAD, workspace, session_id)


def guard_lock_ahead(workspace: str, key: str) -> GuardLock:
    """What a command that first locks a guard (``load_session_and_lock_guard``) can have
    locked ahead by a batch."""
    return GuardLock(_GUARDS_AHEAD, workspace, key)


@substitute(common.load_session)
def load_session(
    conn: Connection, ctx: Context, session_id: str, *, lock: bool = False, own: bool = True
) -> SessionState | None:
    """The session's locked row as the batch read it ahead, while it still holds."""
    row = session_rows.read(conn, _SESSIONS_AHEAD, ctx.workspace, session_id) if lock else None
    if row is None:
        return common.load_session.plain(conn, ctx, session_id, lock=lock, own=own)
    return common.own_session(ctx, row) if own else SessionState(*row)


@substitute(common.lock_guard)
def lock_guard(conn: Connection, workspace: str, key: str) -> None:
    """Nothing sent for a guard the batch holds already; else locked, and remembered."""
    lock = held_locks.guard(workspace, key)
    if held_locks.held(conn, lock):
        return
    common.lock_guard.plain(conn, workspace, key)
    held_locks.hold(conn, lock)


@substitute(common.load_session_and_lock_guard)
def load_session_and_lock_guard(conn: Connection, ctx: Context, session_id: str, key: str) -> SessionState | None:
    """Only the session read when the batch holds the guard already; else both, the guard remembered."""
    lock = held_locks.guard(ctx.workspace, key)
    if held_locks.held(conn, lock):
        return common.load_session(conn, ctx, session_id)
    session = common.load_session_and_lock_guard.plain(conn, ctx, session_id, key)
    held_locks.hold(conn, lock)
    return session
