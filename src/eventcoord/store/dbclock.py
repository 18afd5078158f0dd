"""The database's clock and the liveness TTL, as every decision and read sees them (docs/protocol.md#liveness).

PostgreSQL's clock is the one clock all replicas share; SQLite lives in one file on one
host, so its clock is this host's. The TTL is kept in the database (``settings``) and
cached on the connection it was read through. A process started with
``EVENTCOORD_TEST_CLOCK=1`` (tests and development only) honours a test clock kept in
``settings`` too, moved by :func:`advance` and :func:`pin` (CONTRIBUTING.md, "The test clock").
"""

from __future__ import annotations

import os
import time

from sqlalchemy import Connection, delete, insert, select

from eventcoord.store import transaction
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
#: The ``settings`` row of the test clock: ``+<µs>`` shifts the database's clock, ``=<µs>``
#: pins it there. Read only by a process the environment variable below enables.
TEST_CLOCK_KEY = "test_clock"
#: ``1`` in a process's environment lets it honour the test clock; no API route sets either.
TEST_CLOCK_ENV = "EVENTCOORD_TEST_CLOCK"
_test_clock_on: bool | None = None

_READ_TTL = Prepared(lambda d: select(settings.c.value).where(settings.c.key == "ttl_seconds"))
_PG_NOW = "SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint"


def read(conn: Connection) -> tuple[int, int]:
    """The database's clock in microseconds and the liveness TTL in seconds."""
    running = transaction.current(conn)
    kept = None if running is None else running.clock()
    if kept is not None:  # a PostgreSQL batch reads them once, in its first statement
        return kept
    if conn.dialect.name == "postgresql":
        now_us = int(conn.exec_driver_sql(_PG_NOW).scalar_one())
    else:
        # SQLite lives in one file on one host: its clock is this host's clock.
        now_us = time.time_ns() // 1000
    if test_clock_on():
        now_us = shifted(now_us, read_test_clock(conn))
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


def test_clock_on() -> bool:
    """Whether this process honours the test clock (``EVENTCOORD_TEST_CLOCK=1``, read once)."""
    global _test_clock_on
    if _test_clock_on is None:
        _test_clock_on = os.environ.get(TEST_CLOCK_ENV, "") == "1"
    return _test_clock_on


def enable_test_clock(on: bool | None = True) -> None:
    """Honour (or stop honouring) the test clock in this process, as the variable would;
    ``None``: as the environment says."""
    global _test_clock_on
    _test_clock_on = on


def read_test_clock(conn: Connection) -> str | None:
    """The test clock's row as stored (None: the database's own clock)."""
    value: str | None = conn.execute(select(settings.c.value).where(settings.c.key == TEST_CLOCK_KEY)).scalar()
    return value


def shifted(now_us: int, test_clock: str | None) -> int:
    """The clock a test set: ``now_us`` shifted by ``+<µs>``, or the moment ``=<µs>`` pins."""
    if not test_clock:
        return now_us
    value = int(test_clock[1:])
    return value if test_clock[0] == "=" else now_us + value


def _write_test_clock(conn: Connection, value: str) -> None:
    conn.execute(delete(settings).where(settings.c.key == TEST_CLOCK_KEY))
    conn.execute(insert(settings).values(key=TEST_CLOCK_KEY, value=value))


def advance(conn: Connection, seconds: float) -> None:
    """Move the test clock ``seconds`` forward (a pinned clock stays pinned, later).

    Every process that honours the test clock sees it at its next decision or read: the
    row is read in the statement that reads the clock, never cached.
    """
    current = read_test_clock(conn) or "+0"
    _write_test_clock(conn, f"{current[0]}{int(current[1:]) + round(seconds * 1_000_000)}")


def pin(conn: Connection, at_us: int | None = None) -> int:
    """Stop the test clock at ``at_us`` (default: the moment it shows now); returns it."""
    if at_us is None:
        at_us = read(conn)[0] if test_clock_on() else shifted(time.time_ns() // 1000, read_test_clock(conn))
    _write_test_clock(conn, f"={at_us}")
    return at_us
