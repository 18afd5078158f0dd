"""Revocation reaches open streams: one watcher per process asks the database which tokens went.

A stream registers the ``token_id`` it was opened with. While any stream is open, the watcher
asks the tokens table once every :data:`EVERY` seconds which of those ids are revoked — one
query however many streams, and a revocation committed on any replica is seen by all — and
tells each stream of a revoked token, which then ends (docs/protocol.md#server-sent-events).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Iterator

from sqlalchemy import Connection, select

from eventcoord.store.base import EventStore
from eventcoord.store.schema import tokens

logger = logging.getLogger("eventcoord.revocations")
#: Seconds between two looks at the tokens table (a stream ends within this plus one query).
EVERY = 1.0
#: Token ids asked about in one statement.
_CHUNK = 500


def revoked_among(conn: Connection, token_ids: list[str]) -> set[str]:
    """The ids among ``token_ids`` whose token is revoked (unknown ids, the operator's, are not)."""
    found: set[str] = set()
    for i in range(0, len(token_ids), _CHUNK):
        chunk = token_ids[i : i + _CHUNK]
        rows = conn.execute(
            select(tokens.c.token_id).where(tokens.c.token_id.in_(chunk) & tokens.c.revoked_us.is_not(None))
        )
        found.update(str(r.token_id) for r in rows)
    return found


class Revocations:
    """The open streams by token id, and the one task that watches their tokens."""

    def __init__(self, store: EventStore, every: float = EVERY) -> None:
        self._store = store
        self._every = every
        self._open: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def watch(self, token_id: str) -> Iterator[asyncio.Event]:
        """An event set once ``token_id`` is revoked, for as long as the ``with`` lasts."""
        revoked = asyncio.Event()
        self._open.setdefault(token_id, set()).add(revoked)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="revocations")
        try:
            yield revoked
        finally:
            waiting = self._open.get(token_id)
            if waiting is not None:
                waiting.discard(revoked)
                if not waiting:
                    del self._open[token_id]

    async def stop(self) -> None:
        """Stop watching (the server is stopping)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        # Runs while a stream is open; the next stream to open starts it again.
        while self._open:
            await asyncio.sleep(self._every)
            ids = list(self._open)
            if not ids:
                return
            try:
                revoked = await self._store.query(functools.partial(revoked_among, token_ids=ids))
            except Exception as e:  # the loop boundary: an outage must not end the watching
                logger.warning("could not read revocations: %s", e)
                continue
            for token_id in revoked:
                for event in self._open.pop(token_id, ()):
                    event.set()
