"""When a PostgreSQL writer takes its next batch: at once, or after waiting for more commands.

Each batch costs a few round trips whatever its size, so a writer whose last batch had
company and finds fewer commands waiting waits a little for more (:class:`Gathering`),
until as many wait as the last batch held or its window closes (:func:`window`):
``GROUP_COMMIT_WINDOW`` normally; as long as the last batch took, up to ``GATHER_MAX``,
while the event loop's thread waits for a CPU about as long as it runs
(``store/postgres/cpu_pressure.py``). Why: docs/architecture.md#gathering-a-batch.
"""

from __future__ import annotations

import asyncio

#: How long a writer waits for more commands when it has CPU to spare.
GROUP_COMMIT_WINDOW = 0.001
#: The longest it waits when starved of CPU (it waits as long as its last batch took).
GATHER_MAX = 0.005


def window(took: float, starved: bool) -> float:
    """How long a writer may wait for its next batch to fill, its last batch having taken
    ``took`` seconds; ``starved``: its thread waits for a CPU (``CpuPressure.starved``)."""
    if not starved:
        return GROUP_COMMIT_WINDOW
    return max(GROUP_COMMIT_WINDOW, min(GATHER_MAX, took))


class Gathering:
    """A writer waiting for its next batch to fill; one writer gathers at a time."""

    __slots__ = ("_target", "_waiting")

    def __init__(self) -> None:
        self._waiting: asyncio.Future[bool] | None = None
        self._target = 0

    @property
    def busy(self) -> bool:
        """Whether a writer is gathering now."""
        return self._waiting is not None

    def arrived(self, waiting: int) -> None:
        """A command arrived and ``waiting`` commands wait now: enough ends the wait."""
        w = self._waiting
        if w is not None and waiting >= self._target and not w.done():
            w.set_result(True)

    def end(self) -> None:
        """End the wait now, as if its window closed (the store is closing)."""
        if self._waiting is not None:
            _settle(self._waiting, False)

    async def wait(self, target: int, window: float) -> bool:
        """Wait until ``target`` commands wait (:meth:`arrived` says so) or ``window`` seconds
        passed; whether they came. Another writer gathering meanwhile: just wait ``window``."""
        if self._waiting is not None:
            await asyncio.sleep(window)
            return False
        loop = asyncio.get_running_loop()
        came: asyncio.Future[bool] = loop.create_future()
        self._waiting, self._target = came, target
        timer = loop.call_later(window, _settle, came, False)
        try:
            return await came
        finally:
            timer.cancel()
            self._waiting = None


def _settle(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)
