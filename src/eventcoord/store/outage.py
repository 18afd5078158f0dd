"""Whether the database answers us: one log line as an outage begins, one as it ends.

An outage is any failure to get a connection (refused, reset, too many connections, the
database closed to connections, starting or shutting down) or a connection lost while in
use. Each operation it fails is a :class:`StoreUnavailable` (503 ``STORE_UNAVAILABLE``,
docs/protocol.md#errors); the log says it once, not once per request.
"""

from __future__ import annotations

import logging
import time

from eventcoord.errors import StoreUnavailable

log = logging.getLogger("eventcoord.store")


class Outage:
    """The database's reachability as the last operations found it (one event loop's view)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._since: float | None = None  # monotonic time the outage began
        self._refused = 0

    @property
    def down(self) -> bool:
        """Whether the last operation found the database unreachable."""
        return self._since is not None

    def failed(self, cause: str) -> StoreUnavailable:
        """The error for one operation the database did not take; logs the outage's first."""
        if self._since is None:
            self._since = time.monotonic()
            self._refused = 0
            log.warning("%s: database unreachable (%s); answering 503 until it is back", self.name, cause)
        self._refused += 1
        return StoreUnavailable(f"{self.name} unreachable: {cause}")

    def answered(self) -> None:
        """An operation went through: an outage, if there was one, is over (said once)."""
        if self._since is not None:
            took = time.monotonic() - self._since
            log.warning(
                "%s: database reachable again after %.1f s (%d operations refused)", self.name, took, self._refused
            )
            self._since = None
