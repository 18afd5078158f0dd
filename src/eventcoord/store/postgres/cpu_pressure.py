"""Whether the thread that runs the event loop waits for a CPU: the kernel's scheduler says.

Linux counts, for every thread, the time it ran and the time it was ready to run but
waited for a CPU (``/proc/thread-self/schedstat``: run time, run delay, time slices, in
nanoseconds). A PostgreSQL writer uses it to decide whether to gather fuller batches
(``store/postgres/gathering.py``, docs/architecture.md#gathering-a-batch). Where the file does not
exist (another system, a kernel without scheduler statistics), the pressure stays 0.
"""

from __future__ import annotations

from pathlib import Path

#: Where the kernel keeps the calling thread's scheduler statistics.
SCHEDSTAT = Path("/proc/thread-self/schedstat")
#: Seconds between two readings at least (one small read each).
EVERY = 0.1
#: Weight of the newest reading in the running average (about a second of memory).
WEIGHT = 0.2
#: Waiting this long for a CPU per second run counts as starved (measured: ~1.0 with three
#: replicas, 0.4-0.8 with two, 0.1-0.25 with one replica or a paced fleet on this machine).
STARVED = 0.4


class CpuPressure:
    """A running average of the time this thread waited for a CPU per second it ran.

    Read it from the thread whose waiting matters (the event loop's): the kernel's
    ``thread-self`` is the thread that reads.
    """

    __slots__ = ("_at", "_delay_ns", "_path", "_ran_ns", "pressure")

    def __init__(self, path: Path = SCHEDSTAT) -> None:
        self._path = path
        self._at: float | None = None
        self._ran_ns = 0
        self._delay_ns = 0
        #: Seconds waited for a CPU per second run, averaged over about the last second.
        self.pressure = 0.0

    def sample(self, now: float) -> float:
        """Take a reading if ``EVERY`` seconds passed since the last (``now``: a monotonic
        clock, e.g. the loop's); returns the pressure."""
        if self._at is not None and now - self._at < EVERY:
            return self.pressure
        counters = read_schedstat(self._path)
        if counters is None:
            return self.pressure
        ran_ns, delay_ns = counters
        if self._at is not None and ran_ns > self._ran_ns:
            waited = max(0, delay_ns - self._delay_ns) / (ran_ns - self._ran_ns)
            self.pressure += WEIGHT * (waited - self.pressure)
        self._at, self._ran_ns, self._delay_ns = now, ran_ns, delay_ns
        return self.pressure

    def starved(self, now: float) -> bool:
        """Whether the thread waits for a CPU about as long as :data:`STARVED` per second run."""
        return self.sample(now) >= STARVED


def read_schedstat(path: Path = SCHEDSTAT) -> tuple[int, int] | None:
    """Run time and run delay (ns) from a schedstat file; None if there is none to read."""
    try:
        fields = path.read_text().split()
        return int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None
