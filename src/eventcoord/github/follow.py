"""Following the log: a sync soon after every change that can move what GitHub shows, and one
every ``interval`` seconds for what the log cannot tell (a person's edits on GitHub, a
session that went quiet and so lost its live lease).

The Server-Sent Events stream is read on a thread of its own, which reconnects from the last
position it saw when the server goes away; the loop gathers a burst of changes into one sync.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from eventcoord.client import Client, Refused, Unreachable

#: Events after which GitHub may have to show something else.
CHANGES = frozenset(
    {
        "LeaseGranted",
        "LeaseReleased",
        "WorkEnqueued",
        "WorkClaimed",
        "WorkStarted",
        "WorkFinished",
        "WorkRequeued",
    }
)
#: A burst of changes is synced together once it has been quiet this long (seconds) …
QUIET = 0.2
#: … or once it has lasted this long.
GATHER = 1.0
#: Seconds before a stream that failed is opened again.
RECONNECT = 1.0
#: Seconds of silence after which the stream counts as cut (the server's keep-alives come
#: every 15 s).
SILENCE = 45.0


def listen(url: str, token: str, after: int, changes: queue.Queue[int], stop: threading.Event) -> None:
    """Put the position of every change after ``after`` on ``changes`` until ``stop`` is set."""
    while not stop.is_set():
        try:
            with Client(url, token) as client:
                for event in client.stream(after, timeout=SILENCE):
                    after = event.position
                    if event.type in CHANGES:
                        changes.put(event.position)
                    if stop.is_set():
                        return
        except (Unreachable, Refused):
            pass  # the server restarts, or the stream was cut: open it again from the last position
        stop.wait(RECONNECT)


def head(client: Client) -> int:
    """The newest position of the log, as ``/health`` reports it."""
    reply = client.fetch("/health")
    return int(reply.payload().get("head") or 0)


def follow(sync: Callable[[], int], client: Client, after: int, interval: float) -> int:
    """Run ``sync`` after each change past ``after`` and every ``interval`` seconds; return the
    exit code of a sync that cannot get better by trying again (2 usage, 4 access), else run
    until interrupted."""
    changes: queue.Queue[int] = queue.Queue()
    stop = threading.Event()
    thread = threading.Thread(
        target=listen,
        args=(client.target.url, client.target.token, after, changes, stop),
        name="github-sync-listen",
        daemon=True,
    )
    thread.start()
    try:
        last = time.monotonic()
        while True:
            try:
                changes.get(timeout=max(0.0, last + interval - time.monotonic()))
                _gather(changes)
            except queue.Empty:
                pass
            last = time.monotonic()
            code = sync()
            if code in (2, 4):
                return code
    finally:
        stop.set()


def _gather(changes: queue.Queue[int]) -> None:
    """Take the rest of a burst of changes off the queue."""
    until = time.monotonic() + GATHER
    while True:
        try:
            changes.get(timeout=max(0.0, min(QUIET, until - time.monotonic())))
        except queue.Empty:
            return
        if time.monotonic() >= until:
            return
