"""A least-recently-used memo bounded in bytes, for what the path matcher keeps between calls.

Bounded by an estimate of the memory its entries hold, not by their count: a count bound
let 8,192 parsed 1,000-character patterns (and their compiled forms) grow the server to a gigabyte.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ByteLru(Generic[K, V]):
    """Maps keys to values, dropping the least recently used once ``max_bytes`` is passed.

    ``size`` estimates the bytes one entry holds (key and value together); an entry larger
    than the whole bound is not kept. Safe to share between threads (rebuilds read paths on
    a worker thread while the event loop decides).
    """

    def __init__(self, max_bytes: int, size: Callable[[K, V], int]) -> None:
        self.max_bytes = max_bytes
        self._size = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()
        #: The estimated bytes of every entry kept now.
        self.bytes = 0

    def get(self, key: K) -> V | None:
        """The value kept for ``key`` (now the most recently used), or None."""
        # Without the lock: each dict operation is atomic, and a hit is the hot path.
        entry = self._entries.get(key)
        if entry is None:
            return None
        try:  # noqa: SIM105 (a hit is the hot path: no context manager)
            self._entries.move_to_end(key)
        except KeyError:  # dropped by another thread meanwhile: still a valid answer
            pass
        return entry[0]

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key``, dropping the least recently used to stay in bounds."""
        size = self._size(key, value)
        if size > self.max_bytes:
            return value
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._entries[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped
        return value

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)
