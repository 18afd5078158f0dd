"""The chainer's hashing in a process of its own, beside ``eventcoord serve``.

Hashing (~6 µs an event) in the serving process would take the interpreter lock from the
commands, and a second process writing a SQLite file would make the server's writer wait. So
the child only reads the log and computes links (``history/chain.py``), one step at a time,
on standard output; the server stores each step (``EventStore.write_aside``) and answers ``ok``
or ``again`` (re-read the stored tip). Started with the server and again if it exits; exits
when its parent is gone. Run as ``python -m eventcoord.history.chain_process --db URL --parent PID``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from functools import partial

import msgspec
from sqlalchemy.ext.asyncio import create_async_engine

from eventcoord.errors import StoreUnavailable
from eventcoord.history import chain
from eventcoord.history.chainer import POLL_SECONDS, STEP
from eventcoord.history.child_process import end_child
from eventcoord.store.base import EventStore

_log = logging.getLogger(__name__)

#: Seconds before a child that exited is started again.
RESTART_SECONDS = 1.0
_LINKS = msgspec.json.Decoder(list[tuple[int, str]])


class ChainProcess:
    """Runs the chainer's child and stores the links it computes."""

    def __init__(self, store: EventStore, database_url: str, poll_seconds: float = POLL_SECONDS) -> None:
        self.store = store
        self.database_url = database_url
        self.poll_seconds = poll_seconds
        self._task: asyncio.Task[None] | None = None
        self._child: asyncio.subprocess.Process | None = None

    async def _spawn(self) -> asyncio.subprocess.Process:
        argv = [sys.executable, "-m", __name__, "--db", self.database_url, "--parent", str(os.getpid())]
        argv += ["--poll", str(self.poll_seconds)]
        pipe = asyncio.subprocess.PIPE
        return await asyncio.create_subprocess_exec(*argv, stdin=pipe, stdout=pipe, limit=2**24)

    async def _serve(self, child: asyncio.subprocess.Process) -> None:
        """Store each step the child sends, and answer it, until it exits."""
        assert child.stdout is not None and child.stdin is not None
        while line := await child.stdout.readline():
            try:
                new = _LINKS.decode(line)
                await self.store.write_aside(partial(chain.store_links, new=new))
                answer = b"ok\n"
            except Exception as e:  # not stored: the child reads the stored tip again
                if not isinstance(e, StoreUnavailable):  # an outage is logged once, by the store
                    _log.warning("storing the chain's links failed; retrying", exc_info=True)
                answer = b"again\n"
                await asyncio.sleep(self.poll_seconds)
            child.stdin.write(answer)
            await child.stdin.drain()

    async def _supervise(self) -> None:
        while True:
            try:
                self._child = child = await self._spawn()
                await self._serve(child)
                code = await child.wait()
                _log.warning("the chainer exited with %s; starting it again", code)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a loop boundary (a broken pipe, a child killed): start again
                _log.warning("the chainer failed (%s: %s); starting it again", type(e).__name__, e)
                await self._end_child()
            await asyncio.sleep(RESTART_SECONDS)

    def start(self) -> None:
        """Start the child and keep it running."""
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name="eventcoord-chain-process")

    async def _end_child(self) -> None:
        child, self._child = self._child, None
        await end_child(child)

    async def stop(self) -> None:
        """Stop the child (:func:`end_child`: SIGTERM, then SIGKILL); what is stored stays."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._end_child()


async def _run_child(database_url: str, parent: int, poll_seconds: float) -> None:
    """Compute steps of links from the stored tip on; each waits for the server's answer."""
    engine = create_async_engine(database_url)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer
    start: tuple[int, str] | None = None  # None: from the stored tip
    reported: int | None = None
    failing = False
    try:
        while os.getppid() == parent:
            try:
                async with engine.connect() as conn:
                    new = await conn.run_sync(partial(chain.next_links, limit=STEP, start=start))
            except chain.Broken as e:  # the log itself is damaged: say so once, keep looking
                if e.position != reported:
                    reported = e.position
                    _log.error("the log's hash chain cannot go on: %s (eventcoord rebuild --check)", e)
                new = []
            except Exception as e:  # the store may be down: look again later (said once)
                if not failing:
                    _log.warning("reading the log failed (%s); retrying until it answers", type(e).__name__)
                failing = True
                new, start = [], None
            else:
                failing = False
            if not new:
                await asyncio.sleep(poll_seconds)
                continue
            out.write(msgspec.json.encode(new) + b"\n")
            out.flush()
            answer = await reader.readline()
            if not answer:
                return  # the server is gone
            start = new[-1] if answer == b"ok\n" else None
            if len(new) < STEP:  # caught up: a step per poll, not one per commit (each costs the server a write)
                await asyncio.sleep(poll_seconds)
    finally:
        await engine.dispose()


def main(argv: list[str] | None = None) -> int:
    """The child's entry point."""
    p = argparse.ArgumentParser(prog="python -m eventcoord.history.chain_process")
    p.add_argument("--db", required=True, help="the store's SQLAlchemy URL")
    p.add_argument("--parent", type=int, required=True, help="the server's pid: exit when it is gone")
    p.add_argument("--poll", type=float, default=POLL_SECONDS, help="seconds between looks at the log")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s chainer %(levelname)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        asyncio.run(_run_child(args.db, args.parent, args.poll))
    return 0


if __name__ == "__main__":
    sys.exit(main())
