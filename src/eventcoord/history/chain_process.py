"""The chainer in a process of its own, beside ``eventcoord serve``.

Hashing the log is Python work (~10 µs an event): in the serving process it would take the
interpreter lock from the commands (measured: ~12 µs more server CPU per heartbeat at
saturation). So the server runs the chainer (:class:`~eventcoord.history.chainer.Chainer`) in
a child process with its own connection to the store, started with the server, started
again if it exits, stopped with it; the child exits by itself when its parent is gone.

Run as ``python -m eventcoord.history.chain_process --db URL --parent PID``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys

from eventcoord.history.chainer import POLL_SECONDS, Chainer
from eventcoord.store import open_store

_log = logging.getLogger(__name__)

#: Seconds between looks at the child; and to wait for it to stop after SIGTERM.
SUPERVISE_SECONDS = 1.0
STOP_SECONDS = 5.0


class ChainProcess:
    """Supervises the chainer's child process."""

    def __init__(self, database_url: str, poll_seconds: float = POLL_SECONDS) -> None:
        self.database_url = database_url
        self.poll_seconds = poll_seconds
        self._task: asyncio.Task[None] | None = None
        self._child: asyncio.subprocess.Process | None = None

    async def _spawn(self) -> asyncio.subprocess.Process:
        argv = [sys.executable, "-m", __name__, "--db", self.database_url, "--parent", str(os.getpid())]
        argv += ["--poll", str(self.poll_seconds)]
        return await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL)

    async def _supervise(self) -> None:
        while True:
            try:
                child = self._child
                if child is not None and child.returncode is not None:
                    _log.warning("the chainer exited with %s; starting it again", child.returncode)
                    self._child = child = None
                if child is None:
                    self._child = await self._spawn()
            except asyncio.CancelledError:
                raise
            except Exception:  # a loop boundary: look again later
                _log.warning("chainer supervision failed; retrying", exc_info=True)
            await asyncio.sleep(SUPERVISE_SECONDS)

    def start(self) -> None:
        """Start the child and keep it running."""
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name="eventcoord-chain-process")

    async def stop(self) -> None:
        """Stop supervising and stop the child (SIGTERM, then SIGKILL after ``STOP_SECONDS``)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        child, self._child = self._child, None
        if child is not None and child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.terminate()
            try:
                await asyncio.wait_for(child.wait(), STOP_SECONDS)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()


async def _run_child(database_url: str, parent: int, poll_seconds: float) -> None:
    store = open_store(database_url)
    await store.start()
    chainer = Chainer(store, poll_seconds)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    chainer.start()
    try:
        while not stopping.is_set() and os.getppid() == parent:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), 1.0)
    finally:
        await chainer.stop()
        await store.close()


def main(argv: list[str] | None = None) -> int:
    """The child's entry point."""
    p = argparse.ArgumentParser(prog="python -m eventcoord.history.chain_process")
    p.add_argument("--db", required=True, help="the store's SQLAlchemy URL")
    p.add_argument("--parent", type=int, required=True, help="the server's pid: exit when it is gone")
    p.add_argument("--poll", type=float, default=POLL_SECONDS, help="seconds between looks at the log")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s chainer %(levelname)s %(message)s")
    asyncio.run(_run_child(args.db, args.parent, args.poll))
    return 0


if __name__ == "__main__":
    sys.exit(main())
