"""What a PostgreSQL batch reads or locks ahead for a command.

A command's reads ahead (its session's row, a guard, the rows the guard protects) come
from ``ahead/table.py``'s ``READS_AHEAD``; the writer reads or locks those of all the
commands of a batch in one statement each. While a command runs, the writer keeps its
reads ahead on the connection: :func:`declared_ahead` finds them there.
"""

from __future__ import annotations

from sqlalchemy import Connection

from eventcoord.store.postgres.held_locks import GuardLock
from eventcoord.store.postgres.rows_ahead import RowsAhead
from eventcoord.store.postgres.session_rows import SessionRead
from eventcoord.store.prepared import Prepared

#: One thing a command reads or locks first, which a batch may do for all its commands in
#: one statement (``session_rows.py``, ``held_locks.py``, ``rows_ahead.py``).
ReadAhead = SessionRead | GuardLock | RowsAhead
#: One of them, or several in the order the command needs them.
ReadsAhead = ReadAhead | tuple[ReadAhead, ...]
#: Where the writer keeps the running command's reads ahead on its connection.
RUNNING = "eventcoord.ahead"


def declared_ahead(conn: Connection, statement: Prepared) -> RowsAhead | None:
    """The read ahead of ``statement`` the running command declared (``ahead/table.py``);
    None: none (on SQLite, or outside a PostgreSQL batch, always)."""
    ahead = conn.info.get(RUNNING)
    for r in ahead if isinstance(ahead, tuple) else (ahead,):
        if isinstance(r, RowsAhead) and r.statement is statement:
            return r
    return None
