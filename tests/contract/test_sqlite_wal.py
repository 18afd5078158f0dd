"""SQLite's write-ahead log starts over under sustained writes instead of growing without end.

A checkpoint copies the log into the database file beside the writer, but SQLite starts
the log over only when a write transaction begins on a log copied to its end. With a
writer that never pauses, that moment never came: the log grew by about 100 MB a second
of claims, and every command slowed as it grew. The store now holds its writer for the
last copy when the log is long (``SqliteEventStore.checkpoint``). These tests run real
concurrent commands on a real SQLite file and read the log's own header.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from eventcoord.codec import decode_command
from eventcoord.context import Caller
from eventcoord.metrics import REGISTRY
from eventcoord.service import Service
from eventcoord.store import open_store
from eventcoord.store.sqlite.store import SqliteEventStore

OPERATOR = Caller("default", "admin", operator=True)


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def wal_restarts(db: Path) -> int:
    """The WAL header's checkpoint sequence number: SQLite adds one each time the log
    starts over (https://sqlite.org/fileformat.html#the_write_ahead_log, offset 12)."""
    with open(f"{db}-wal", "rb") as f:
        header = f.read(16)
    return int(struct.unpack(">I", header[12:16])[0]) if len(header) == 16 else 0


async def send(service: Service, body: dict[str, Any]) -> Any:
    return await service.execute(OPERATOR, decode_command(json.dumps(body).encode()))


async def register(service: Service, n: int) -> list[str]:
    """``n`` new agent sessions."""
    return [(await send(service, {"type": "register_agent", "actor": f"a{i}"})).result["session_id"] for i in range(n)]


async def claims_until(service: Service, session: str, tag: str, deadline: float) -> int:
    """claim_issue on new issues (two per project) until ``deadline``; how many."""
    n = 0
    while time.monotonic() < deadline:
        body = {"type": "claim_issue", "session_id": session, "project": f"P{tag}-{n // 2}", "issue": f"I{tag}-{n}"}
        await send(service, body)
        n += 1
    return n


@contextlib.asynccontextmanager
async def sqlite_store(db: Path, interval: float, restart_frames: int) -> AsyncIterator[SqliteEventStore]:
    """A started, migrated store on ``db`` that checkpoints every ``interval`` seconds and
    finishes the log past ``restart_frames``; closed after."""
    store = open_store(f"sqlite+aiosqlite:///{db}")
    assert isinstance(store, SqliteEventStore)
    store.checkpoint_interval, store.wal_restart_frames = interval, restart_frames
    await store.start()
    await store.migrate()
    try:
        yield store
    finally:
        await store.close()


async def test_the_wal_starts_over_while_commands_keep_coming(tmp_path: Path) -> None:
    db = tmp_path / "eventcoord.db"
    async with sqlite_store(db, 0.05, 256) as store:
        service = Service(store)
        sessions = await register(service, 16)
        finished, holds, restarts = (
            sample("eventcoord_sqlite_wal_finished_total"),
            sample("eventcoord_sqlite_wal_hold_seconds_count"),
            wal_restarts(db),
        )
        peak = 0

        async def watch(deadline: float) -> None:
            nonlocal peak
            while time.monotonic() < deadline:
                peak = max(peak, int(sample("eventcoord_sqlite_wal_frames")))
                await asyncio.sleep(0.01)

        deadline = time.monotonic() + 3.0
        counts = await asyncio.gather(
            *(claims_until(service, s, str(i), deadline) for i, s in enumerate(sessions)), watch(deadline)
        )
        claims = sum(c for c in counts if c is not None)
        # The writer never paused: every batch was queued while the one before committed.
        assert claims > 1_000
        assert wal_restarts(db) - restarts >= 5
        # ~9 pages a claim: unchecked, the log would have held every page of every claim.
        assert 0 < peak < claims * 9 / 2
        assert sample("eventcoord_sqlite_wal_finished_total") - finished >= 5
        assert sample("eventcoord_sqlite_wal_hold_seconds_count") - holds >= 5


async def test_a_held_writer_answers_every_command_once_the_checkpoint_is_done(tmp_path: Path) -> None:
    """Commands sent while the last copy holds the writer wait for it, then all commit."""
    db = tmp_path / "eventcoord.db"
    async with sqlite_store(db, 3600.0, 1) as store:  # only this test's own checkpoint() runs
        service = Service(store)
        sessions = await register(service, 8)
        restarts = wal_restarts(db)
        checkpoint = asyncio.create_task(store.checkpoint())

        async def held() -> None:
            while not store._held:  # the first copy ran beside the writer; now the last one
                await asyncio.sleep(0)

        await asyncio.wait_for(held(), 10)
        beats = [asyncio.create_task(send(service, {"type": "heartbeat_agent", "session_id": s})) for s in sessions]
        await asyncio.sleep(0.01)
        assert store._held or checkpoint.done()
        await checkpoint
        answers = await asyncio.gather(*beats)
        positions = sorted(a.position for a in answers)
        assert positions == list(range(positions[0], positions[0] + len(sessions)))
        assert wal_restarts(db) == restarts + 1  # that batch began on a log copied to its end
