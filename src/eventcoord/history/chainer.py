"""The chainer: the log's hash chain extended in the background, in position order.

It reads the events after the newest stored link, computes their links (``history/chain.py``)
and stores them beside the commands' batches (``EventStore.write_aside``); two replicas
computing the same links store them once (the database keeps the first row). A command never
waits for it (docs/decisions/0009-the-chain-follows-the-log.md). The server splits this work:
a child process computes, the server stores (``history/chain_process.py``); this class does
both in one process (tools, tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from eventcoord.errors import StoreUnavailable
from eventcoord.history import chain
from eventcoord.store.base import EventStore

_log = logging.getLogger(__name__)

#: Seconds between looks at the log while the chain has caught up.
POLL_SECONDS = 0.1
#: Links computed and stored per step (a step's Python work stays a few milliseconds).
STEP = 500


class Chainer:
    """Extends the stored chain of one store until stopped."""

    def __init__(self, store: EventStore, poll_seconds: float = POLL_SECONDS, step: int = STEP) -> None:
        self.store = store
        self.poll_seconds = poll_seconds
        self.step_size = step
        self._task: asyncio.Task[None] | None = None
        self._reported: int | None = None

    async def step(self) -> int:
        """Chain up to ``step`` events after the tip; returns how many were chained."""
        new = await self.store.query(lambda c: chain.next_links(c, self.step_size))
        if new:
            await self.store.write_aside(lambda c: chain.store_links(c, new))
        return len(new)

    async def catch_up(self) -> int:
        """Chain every event committed so far (tests, tools)."""
        total = 0
        while n := await self.step():
            total += n
        return total

    async def _run(self) -> None:
        while True:
            try:
                n = await self.step()
            except asyncio.CancelledError:
                raise
            except chain.Broken as e:  # the log itself is damaged: say so once, keep looking
                if e.position != self._reported:
                    self._reported = e.position
                    _log.error("the log's hash chain cannot go on: %s (eventcoord rebuild --check)", e)
                n = 0
            except Exception as e:  # a loop boundary: the store may be down; look again later
                if not isinstance(e, StoreUnavailable):  # an outage is logged once, by the store
                    _log.warning("chaining the log failed; retrying", exc_info=True)
                n = 0
            if n < self.step_size:
                await asyncio.sleep(self.poll_seconds)
            else:
                await asyncio.sleep(0)  # behind: go on, letting the commands have the loop between steps

    def start(self) -> None:
        """Start chaining in the background."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="eventcoord-chainer")

    async def stop(self) -> None:
        """Stop chaining (what is stored stays; the next start goes on from it)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
