"""State loading shared by handlers: reads of the inline read models, with row locks.

On PostgreSQL ``FOR UPDATE`` serialises the commands that depend on the same row; on
SQLite the single writer already serialises everything and the clause renders to nothing.
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, select

from eventcoord.context import Context
from eventcoord.domain.sessions import SessionState
from eventcoord.projections.tables import sessions
from eventcoord.store.prepared import Prepared

_SESSION_COLUMNS = (
    sessions.c.session_id,
    sessions.c.actor_key,
    sessions.c.kind,
    sessions.c.stable,
    sessions.c.identity_source,
    sessions.c.host,
    sessions.c.last_seen_us,
    sessions.c.ended_us,
    sessions.c.working_on,
)


def _session_by_id(lock: bool) -> Prepared:
    stmt = select(*_SESSION_COLUMNS).where(
        (sessions.c.session_id == bindparam("sid")) & (sessions.c.workspace == bindparam("ws"))
    )
    return Prepared(lambda d: stmt.with_for_update() if lock else stmt)


_SESSION = _session_by_id(lock=False)
_SESSION_FOR_UPDATE = _session_by_id(lock=True)


def load_session(conn: Connection, ctx: Context, session_id: str, *, lock: bool = False) -> SessionState | None:
    """One session of the caller's workspace (None if absent or in another workspace)."""
    row = (_SESSION_FOR_UPDATE if lock else _SESSION).first(conn, {"sid": session_id, "ws": ctx.workspace})
    return None if row is None else SessionState(*row)


def load_sessions(conn: Connection, ctx: Context, session_ids: set[str]) -> dict[str, SessionState]:
    """Several sessions by id (holders of leases or claims), without locking them."""
    if not session_ids:
        return {}
    rows = conn.execute(
        select(*_SESSION_COLUMNS).where(
            sessions.c.session_id.in_(sorted(session_ids)) & (sessions.c.workspace == ctx.workspace)
        )
    )
    return {r.session_id: SessionState(*r) for r in rows}
