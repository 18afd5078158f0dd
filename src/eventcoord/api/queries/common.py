"""What the reads share: the database's clock with the liveness cutoff, path-prefix filters."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Connection

from eventcoord import liveness
from eventcoord.reads.files import starts_with
from eventcoord.store import dbclock


def clock(conn: Connection) -> tuple[int, int]:
    """``(now_us, ttl_seconds)``: the database's clock, or the moment a history read is pinned to."""
    return dbclock.read_pinned(conn)


def read_clock(conn: Connection) -> tuple[int, int]:
    """``(now_us, cutoff_us)`` by the database's clock: live sessions were seen after the cutoff."""
    now_us, ttl = clock(conn)
    return now_us, liveness.cutoff(now_us, ttl)


def under(conn: Connection, column: Any, prefix: str) -> ColumnElement[bool]:
    """Paths at or below ``prefix``, by whole segments: ``src`` takes ``src``, ``src/…``."""
    cond: ColumnElement[bool] = (column == prefix) | starts_with(conn, column, prefix + "/")
    return cond
