"""Relay leadership: the relay's lease and publish checkpoint, one row of ``relay_state`` per stream.

Renewing the lease and saving the checkpoint are one conditional UPDATE keyed on the
holder and its fencing token, so a relay that lost the lease can never move the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, insert, select, update

from eventcoord.store.log import clock
from eventcoord.store.schema import relay_state


def lease_txn(name: str, me: str, lease_us: int, token: int | None, checkpoint: int) -> Callable[[Connection], tuple[int | None, int]]:
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
                .where((relay_state.c.name == name) & (relay_state.c.holder == me) & (relay_state.c.fencing_token == token))
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
