"""Read model of the waiting lines (docs/protocol.md#waiting): one row per waiter, in log order per line.

A ``WaitStarted`` adds the wait (a files wait: one row per path); ``WaitAbandoned`` and the
waiter's own grant of that resource (handed off or claimed directly) remove it.
"""

from __future__ import annotations

import msgspec
from sqlalchemy import Connection, bindparam, delete

from eventcoord.events import (
    FilesClaimed,
    LeaseGranted,
    NamedLeaseAcquired,
    WaitAbandoned,
    WaitStarted,
)
from eventcoord.store.log import RecordedEvent
from eventcoord.store.prepared import Prepared

from .base import Appliers
from .tables import waits


def started(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WaitStarted)
    keys = e.paths if e.kind == "files" and e.paths else [e.key]
    paths = msgspec.json.encode(e.paths).decode()
    conn.execute(
        waits.insert(),
        [
            {
                "position": r.position,
                "idx": i,
                "workspace": r.metadata.workspace,
                "kind": e.kind,
                "key": key,
                "session_id": e.session_id,
                "actor_key": e.actor_key,
                "project": e.project,
                "issue": e.issue,
                "paths": paths,
                "exclusive": e.exclusive,
                "ttl_seconds": e.ttl_seconds,
                "capacity": e.capacity,
                "since_us": r.recorded_us,
            }
            for i, key in enumerate(keys)
        ],
    )


# A grant removes the grantee's wait for that resource: on every LeaseGranted, FilesClaimed
# and NamedLeaseAcquired, so prebuilt (``ix_waits_session`` finds the session's few rows).
_LEAVE_LINE = Prepared(
    lambda d: delete(waits).where(
        (waits.c.session_id == bindparam("sid"))
        & (waits.c.workspace == bindparam("ws"))
        & (waits.c.kind == bindparam("kind"))
        & (waits.c.key == bindparam("key"))
    ),
    rows={"waits": ("ws", "key")},  # a claim's reads of another issue's line may go with it
)
_LEAVE_FILES = Prepared(
    lambda d: delete(waits).where(
        (waits.c.session_id == bindparam("sid"))
        & (waits.c.workspace == bindparam("ws"))
        & (waits.c.kind == "files")
        & (waits.c.issue == bindparam("key"))
    ),
    # The files waits of one session for one issue: rows no other statement names this way
    # (the lines of issues and leases are named by (ws, key)), so two claims' leaves, or a
    # claim's read of an issue's line, may go together.
    rows={"waits": ("ws", "sid", "key")},
)


def _leave(conn: Connection, workspace: str, kind: str, session_id: str, key: str) -> None:
    """Remove a session's wait in one line (files: the wait of the issue ``key``)."""
    params = {"ws": workspace, "sid": session_id, "key": key}
    if kind == "files":
        _LEAVE_FILES.write(conn, params)
    else:
        _LEAVE_LINE.write(conn, {**params, "kind": kind})


def abandoned(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WaitAbandoned)
    _leave(conn, r.metadata.workspace, e.kind, e.session_id, (e.issue or e.key) if e.kind == "files" else e.key)


def lease_granted(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, LeaseGranted)
    _leave(conn, r.metadata.workspace, "issue", e.session_id, e.issue)


def files_claimed(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, FilesClaimed)
    if e.session_id is not None:
        _leave(conn, r.metadata.workspace, "files", e.session_id, e.issue)


def named_lease_acquired(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, NamedLeaseAcquired)
    _leave(conn, r.metadata.workspace, "lease", e.session_id, e.name)


APPLIERS: Appliers = {
    WaitStarted: started,
    WaitAbandoned: abandoned,
    LeaseGranted: lease_granted,
    FilesClaimed: files_claimed,
    NamedLeaseAcquired: named_lease_acquired,
}
