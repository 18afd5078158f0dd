"""Slow decisions never stop the server answering others, on both backends: a batch of
commands that each spend their whole overlap budget lets a read through between them.

Counted, not timed: the read must come back while most of the commands have not run yet
(before, one batch decided all of them on the event loop first). The read runs on an open
connection, as a serving store's reads do: a store's first read also opens its connection
(on SQLite 19 trips to the reader thread instead of 5), and on a loaded machine those trips
alone outlasted half the batch.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import Connection

from eventcoord.domain.files import CLAIM_WORK_LIMIT
from eventcoord.domain.paths import Work, WorkExceeded, overlaps

#: A plain path of 511 names and a pattern that must be tried at every one of them.
DEEP = "/".join(chr(0x100 + i) for i in range(511)) + "/z"
BLOCK = "**/" + "/".join(f"[{chr(0x200 + i)}]" for i in range(14)) + "/x/**"
COMMANDS = 16


async def test_a_read_gets_through_a_batch_of_commands_at_their_limit(store: Any) -> None:
    started: list[int] = []

    def decide(conn: Connection) -> int:
        """What a claim_files at its limit costs the writer: real overlap checks, counted."""
        started.append(len(started))
        work = Work(CLAIM_WORK_LIMIT)
        try:
            while True:
                overlaps(BLOCK, DEEP, work)
        except WorkExceeded:
            return work.spent

    await store.head()  # the reader's connection is open, as in a serving store
    writes = [asyncio.ensure_future(store.transact(decide)) for _ in range(COMMANDS)]
    await asyncio.sleep(0)  # every command waits for the writer
    await store.head()  # a read, sent while they wait
    ran_before_the_read = len(started)
    spent = await asyncio.gather(*writes)
    assert all(s > CLAIM_WORK_LIMIT for s in spent)
    assert len(started) == COMMANDS
    assert ran_before_the_read < COMMANDS // 2, ran_before_the_read
