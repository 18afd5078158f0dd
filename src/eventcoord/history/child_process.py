"""Stopping a child process the server supervises (the snapshot worker, the chainer).

A module of its own so that a child importing it (the chainer's) loads nothing else:
each server starts one, and what it imports is its start-up time.
"""

from __future__ import annotations

import asyncio
import contextlib

#: Seconds to wait for a child to stop after SIGTERM before killing it.
STOP_SECONDS = 5.0


async def end_child(child: asyncio.subprocess.Process | None) -> None:
    """Stop a supervised child: SIGTERM, then SIGKILL after ``STOP_SECONDS``; None or gone: nothing."""
    if child is not None and child.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            child.terminate()
        try:
            await asyncio.wait_for(child.wait(), STOP_SECONDS)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()
