"""The snapshot worker in a process of its own, beside ``eventcoord serve``.

A snapshot's replay through the projections, in a thread of the serving process, would hold
the interpreter lock the commands need (docs/decisions/0007-snapshots-off-the-command-path.md).
So the server runs the worker (:class:`~eventcoord.history.worker.SnapshotWorker`) in a child
process with its own connection to the store, and only supervises it: started when the first
snapshot is due, started again if it exits, stopped with the server; the child exits by
itself when its parent is gone.

Run as ``python -m eventcoord.history.snapshot_process --db URL --every N --parent PID``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys

from eventcoord import errors
from eventcoord.history.child_process import end_child
from eventcoord.history.worker import POLL_SECONDS, SnapshotWorker, snapshot_due
from eventcoord.store import open_store
from eventcoord.store.base import EventStore

_log = logging.getLogger(__name__)


class SnapshotProcess:
    """Supervises the snapshot worker's child process (same interface as ``SnapshotWorker``)."""

    def __init__(self, store: EventStore, database_url: str, every: int, poll_seconds: float = POLL_SECONDS) -> None:
        self.store = store
        self.database_url = database_url
        self.every = every
        self.poll_seconds = poll_seconds
        self._task: asyncio.Task[None] | None = None
        self._child: asyncio.subprocess.Process | None = None

    async def due(self) -> bool:
        """Whether the head is ``every`` or more events past the newest snapshot."""
        return await snapshot_due(self.store, self.every)

    async def _spawn(self) -> asyncio.subprocess.Process:
        argv = [sys.executable, "-m", __name__, "--db", self.database_url, "--every", str(self.every)]
        argv += ["--parent", str(os.getpid()), "--poll", str(self.poll_seconds)]
        return await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL)

    async def _supervise(self) -> None:
        while True:
            try:
                child = self._child
                if child is not None and child.returncode is not None:
                    _log.warning("snapshot worker exited with %s; starting it again when due", child.returncode)
                    self._child = child = None
                if child is None and await self.due():
                    self._child = await self._spawn()
            except asyncio.CancelledError:
                raise
            except errors.StoreUnavailable:  # an outage, logged once by the store
                pass
            except Exception:  # a loop boundary: look again later
                _log.warning("snapshot worker supervision failed; retrying", exc_info=True)
            await asyncio.sleep(self.poll_seconds)

    def start(self) -> None:
        """Start supervising (no-op when ``every`` is 0: snapshots off)."""
        if self.every > 0 and self._task is None:
            self._task = asyncio.create_task(self._supervise(), name="eventcoord-snapshot-process")

    async def stop(self) -> None:
        """Stop supervising and stop the child (:func:`end_child`: SIGTERM, then SIGKILL)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        child, self._child = self._child, None
        await end_child(child)


async def _run_child(database_url: str, every: int, parent: int, poll_seconds: float) -> None:
    store = open_store(database_url)
    await store.start()
    worker = SnapshotWorker(store, every, poll_seconds)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    worker.start()
    try:
        while not stopping.is_set() and os.getppid() == parent:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), 1.0)
    finally:
        await worker.stop()
        await store.close()


def main(argv: list[str] | None = None) -> int:
    """The child's entry point."""
    p = argparse.ArgumentParser(prog="python -m eventcoord.history.snapshot_process")
    p.add_argument("--db", required=True, help="the store's SQLAlchemy URL")
    p.add_argument("--every", type=int, required=True, help="a snapshot every this many events")
    p.add_argument("--parent", type=int, required=True, help="the server's pid: exit when it is gone")
    p.add_argument("--poll", type=float, default=POLL_SECONDS, help="seconds between looks at the head")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s snapshot worker %(levelname)s %(message)s")
    asyncio.run(_run_child(args.db, args.every, args.parent, args.poll))
    return 0


if __name__ == "__main__":
    sys.exit(main())
