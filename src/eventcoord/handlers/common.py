"""What handlers share beyond the reads (``reads/common.py``): the read ahead a command declared."""

from __future__ import annotations

from eventcoord.context import Context
from eventcoord.reads.common import (
    SESSION_COLUMNS,
    WS,
    guard_upsert,
    load_session,
    load_session_and_lock_guard,
    load_sessions,
    lock_guard,
    own_session,
)
from eventcoord.store.postgres.rows_ahead import RowsAhead
from eventcoord.store.prepared import Prepared

# Until every handler imports them from ``reads.common``.
__all__ = [
    "SESSION_COLUMNS",
    "WS",
    "declared_ahead",
    "guard_upsert",
    "load_session",
    "load_session_and_lock_guard",
    "load_sessions",
    "lock_guard",
    "own_session",
]


def declared_ahead(ctx: Context, statement: Prepared) -> RowsAhead | None:
    """The read ahead the command declared (``handlers.read_ahead``) of ``statement``."""
    ahead = ctx.ahead if isinstance(ctx.ahead, tuple) else (ctx.ahead,)
    for r in ahead:
        if isinstance(r, RowsAhead) and r.statement is statement:
            return r
    return None
