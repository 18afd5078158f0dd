"""Relay leadership: the relay's lease and publish checkpoint, one row of ``relay_state`` per stream.

Renewing the lease and saving the checkpoint are one conditional UPDATE keyed on the
holder and its fencing token, so a relay that lost the lease can never move the checkpoint.
:class:`RelayLease` is one relay's side of it: when to renew, when to flush, whether it
may publish now.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import Connection, insert, select, update

from eventcoord.store.base import EventStore
from eventcoord.store.dbclock import read as clock
from eventcoord.store.schema import relay_state

log = logging.getLogger("eventcoord.outbox.relay")
#: How long a leader may sit on published positions before saving the checkpoint.
FLUSH_INTERVAL = 0.25


class RelayLease:
    """One relay's hold on the leadership of one stream, and the checkpoint it saved."""

    def __init__(self, stream_name: str, instance_id: str, lease_seconds: float) -> None:
        self.stream_name = stream_name
        self.instance_id = instance_id
        self.lease_seconds = lease_seconds
        self.token: int | None = None  # our fencing token while we believe we lead
        self.persisted = 0  # the checkpoint as last written to relay_state
        self._valid_until = 0.0  # monotonic; never publish past it without renewing
        self._renew_at = 0.0
        self._flushed_at = 0.0

    @property
    def held(self) -> bool:
        """Whether this relay holds a lease it may publish under."""
        return self.token is not None and time.monotonic() < self._valid_until

    @property
    def standby_interval(self) -> float:
        """How often a standby tries to take the lease."""
        return min(self.lease_seconds / 3, 1.0)

    async def hold(self, store: EventStore, checkpoint: int, flush: bool = False) -> tuple[bool, int | None]:
        """Acquire, renew and save ``checkpoint`` as due.

        Returns whether this relay may publish, and the leader's saved checkpoint when the
        lease turned out to be someone else's (a standby reports the leader's progress).
        """
        now = time.monotonic()
        dirty = checkpoint > self.persisted
        due = now >= self._renew_at or (dirty and (flush or now - self._flushed_at >= FLUSH_INTERVAL))
        if not due:
            return self.held, None
        lease_us = int(self.lease_seconds * 1_000_000)
        token, persisted = await store.transact(
            lease_txn(self.stream_name, self.instance_id, lease_us, self.token, checkpoint)
        )
        if token is None:
            if self.token is not None:
                log.warning("relay %s: lost the lease of %s", self.instance_id, self.stream_name)
            self.token = None
            self._renew_at = now + self.standby_interval
            self.persisted = persisted
            return False, persisted
        if self.token != token:
            log.info("relay %s: leads %s (fencing token %d)", self.instance_id, self.stream_name, token)
        self.token = token
        self.persisted = max(persisted, checkpoint)
        self._valid_until = now + self.lease_seconds * 0.8  # margin for clock drift
        self._renew_at = now + self.lease_seconds / 3
        self._flushed_at = now
        return True, None

    async def release(self, store: EventStore, checkpoint: int) -> None:
        """Hand the lease back (saving ``checkpoint`` under our token); we no longer lead."""
        try:
            await store.transact(release_txn(self.stream_name, self.instance_id, self.token, checkpoint))
        except Exception as e:  # shutting down: the lease simply expires instead
            log.warning("relay: could not release the lease: %s", e)
        self.token = None


def lease_txn(
    name: str, me: str, lease_us: int, token: int | None, checkpoint: int
) -> Callable[[Connection], tuple[int | None, int]]:
    """Acquire (if free, expired or ours) or renew the lease, saving the checkpoint."""

    def run(conn: Connection) -> tuple[int | None, int]:
        now_us, _ = clock(conn)
        row = conn.execute(select(relay_state).where(relay_state.c.name == name).with_for_update()).first()
        if row is None:
            values = {"name": name, "position": 0, "holder": me, "expires_us": now_us + lease_us, "fencing_token": 1}
            conn.execute(insert(relay_state).values(**values))
            return 1, 0
        if token is not None and row.holder == me and row.fencing_token == token:
            # Renewal: nobody took over since our grant (the token is unchanged).
            position = max(int(row.position), checkpoint)
            conn.execute(
                update(relay_state)
                .where(
                    (relay_state.c.name == name) & (relay_state.c.holder == me) & (relay_state.c.fencing_token == token)
                )
                .values(position=position, expires_us=now_us + lease_us)
            )
            return token, position
        if row.holder is None or row.holder == me or row.expires_us is None or row.expires_us <= now_us:
            new_token = int(row.fencing_token) + 1  # every takeover fences off the previous one
            conn.execute(
                update(relay_state)
                .where((relay_state.c.name == name) & (relay_state.c.fencing_token == row.fencing_token))
                .values(holder=me, expires_us=now_us + lease_us, fencing_token=new_token)
            )
            return new_token, int(row.position)
        return None, int(row.position)

    return run


def release_txn(name: str, me: str, token: int | None, checkpoint: int) -> Callable[[Connection], None]:
    """Hand the lease back; save the checkpoint only under our own token."""

    def run(conn: Connection) -> None:
        ours = (relay_state.c.name == name) & (relay_state.c.holder == me)
        if token is not None:
            conn.execute(
                update(relay_state).where(ours & (relay_state.c.fencing_token == token)).values(position=checkpoint)
            )
        # Even without a known token: a grant committed while stop() cancelled us is ours
        # (instance ids are unique), and releasing it spares a standby the lease expiry.
        conn.execute(update(relay_state).where(ours).values(holder=None, expires_us=None))

    return run
