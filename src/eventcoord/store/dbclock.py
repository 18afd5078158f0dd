"""The database's clock and the liveness TTL, as every decision and read sees them (docs/protocol.md#liveness).

PostgreSQL's clock is the one clock all replicas share; SQLite lives in one file on one
host, so its clock is this host's. The TTL is kept in the database (``settings``) and
cached on the connection it was read through.
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, select

from eventcoord.store import batch
from eventcoord.store.prepared import Prepared
from eventcoord.store.schema import settings

#: How long a process trusts the TTL it read from ``settings`` (replicas pick up a
#: change made by another replica's ``serve --ttl-seconds`` within this many seconds).
TTL_REFRESH_SECONDS = 2.0
#: Where the TTL is cached: on the database connection it was read through
#: (``Connection.info``), so it lives and dies with that connection to that database.
_TTL_KEY = "eventcoord.ttl"

#: ``Connection.info`` key of a pinned clock ``(now_us, ttl)``: a point-in-time read
#: (``eventcoord.history.scratch``) judges liveness at its moment, not now (:func:`read_pinned`).
PINNED_KEY = "eventcoord.as_of_clock"

_READ_TTL = Prepared(lambda d: select(settings.c.value).where(settings.c.key == "ttl_seconds"))
_PG_NOW = "SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint"


def read(conn: Connection) -> tuple[int, int]:
    """The database's clock in microseconds and the liveness TTL in seconds."""
    b = batch.current(conn)
    if b is not None:  # read once per batch, with the TTL, in the batch's first statement
        return b.now_us, b.ttl
    if conn.dialect.name == "postgresql":
        now_us = int(conn.exec_driver_sql(_PG_NOW).scalar_one())
    else:
        # SQLite lives in one file on one host: its clock is this host's clock.
        now_us = time.time_ns() // 1000
    return now_us, ttl_seconds(conn)


def read_pinned(conn: Connection) -> tuple[int, int]:
    """``(now_us, ttl_seconds)``: the moment ``conn`` is pinned to (``PINNED_KEY``), else :func:`read`."""
    pinned: tuple[int, int] | None = conn.info.get(PINNED_KEY)
    return pinned if pinned is not None else read(conn)


def ttl_seconds(conn: Connection) -> int:
    """The liveness TTL kept in the database, re-read at most every couple of seconds."""
    info = conn.info
    hit: tuple[int, float] | None = info.get(_TTL_KEY)
    now = time.monotonic()
    if hit is not None and hit[1] > now:
        return hit[0]
    ttl = int(_READ_TTL.scalar(conn, {}))
    info[_TTL_KEY] = (ttl, now + TTL_REFRESH_SECONDS)
    return ttl


def forget_ttl(conn: Connection) -> None:
    """Drop the TTL cached on ``conn`` (after writing a new one through it)."""
    conn.info.pop(_TTL_KEY, None)
