"""The reads every handler shares, under their old import path (``reads/common.py``)."""

from __future__ import annotations

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

# Until the queue's and the files' handlers import them from ``reads.common``.
__all__ = [
    "SESSION_COLUMNS",
    "WS",
    "guard_upsert",
    "load_session",
    "load_session_and_lock_guard",
    "load_sessions",
    "lock_guard",
    "own_session",
]
