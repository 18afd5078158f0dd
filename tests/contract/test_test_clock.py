"""The test clock: the database clock, shifted or pinned by a test, on both backends.

A process honours it only when enabled (``EVENTCOORD_TEST_CLOCK=1``): liveness, TTLs and
expiry are then tested by moving the clock instead of waiting for it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy import Connection

from eventcoord.store import dbclock

HOUR_US = 3_600_000_000


@pytest.fixture
def test_clock() -> None:
    dbclock.enable_test_clock()  # off again after the test (conftest)


def now(conn: Connection) -> int:
    return dbclock.read(conn)[0]


async def test_an_advanced_clock_is_what_decisions_and_reads_see(store: Any, test_clock: None) -> None:
    before = time.time_ns() // 1000
    await store.transact(lambda c: dbclock.advance(c, 3600))
    # A decision (on PostgreSQL the batch's own clock read) and a read both see it moved.
    decided, read = await store.transact(now), await store.query(now)
    after = time.time_ns() // 1000
    assert before + HOUR_US <= decided <= read <= after + HOUR_US
    await store.transact(lambda c: dbclock.advance(c, 1.5))
    assert await store.query(now) >= before + HOUR_US + 1_500_000


async def test_a_pinned_clock_stands_still_until_advanced(store: Any, test_clock: None) -> None:
    at = await store.transact(lambda c: dbclock.pin(c, 1_000_000_000_000_000))
    assert at == 1_000_000_000_000_000
    assert await store.transact(now) == at == await store.query(now)
    await store.transact(lambda c: dbclock.advance(c, 2))
    assert await store.transact(now) == at + 2_000_000 == await store.query(now)


async def test_a_process_without_the_test_clock_ignores_it(store: Any) -> None:
    assert not dbclock.test_clock_on()
    before = time.time_ns() // 1000
    await store.transact(lambda c: dbclock.advance(c, 3600))
    decided, read = await store.transact(now), await store.query(now)
    assert before <= decided <= read <= time.time_ns() // 1000
