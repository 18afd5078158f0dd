"""Idempotency records: the answer a ``command_id`` replays (docs/protocol.md#answers-and-idempotency).

A record is inserted with the command's events, so a duplicate racing the first command
loses at that insert; inside a PostgreSQL batch its answer is written once the batch's real
positions are known.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, bindparam, select

from eventcoord.store import transaction
from eventcoord.store.prepared import Prepared
from eventcoord.store.schema import idempotency
from eventcoord.store.transaction import Requeue, Resolve, identity

_RECALL = Prepared(
    lambda d: select(idempotency.c.body_hash, idempotency.c.status, idempotency.c.answer).where(
        (idempotency.c.workspace == bindparam("ws")) & (idempotency.c.command_id == bindparam("cid"))
    )
)
_REMEMBER = Prepared(
    lambda d: idempotency.insert().values(
        workspace=bindparam("ws"),
        command_id=bindparam("cid"),
        body_hash=bindparam("hash"),
        status=bindparam("status"),
        answer=bindparam("answer"),
        recorded_us=bindparam("now"),
    )
)


def recall(conn: Connection, workspace: str, command_id: str) -> tuple[str, int, str] | None:
    """The stored answer of a command id: (body hash, HTTP status, answer JSON), or None.

    Raises :class:`~eventcoord.store.transaction.Requeue` when an earlier command of the same
    batch recorded it and its answer is only written at commit.
    """
    row = _RECALL.first(conn, {"ws": workspace, "cid": command_id})
    if row is None:
        return None
    if row[2] == "":
        raise Requeue(f"command {command_id!r} is being answered in this batch")
    return str(row[0]), int(row[1]), str(row[2])


def remember(
    conn: Connection,
    workspace: str,
    command_id: str,
    body_hash: str,
    status: int,
    now_us: int,
    answer: Callable[[Resolve], str],
) -> None:
    """Store the answer a command id replays; ``answer`` builds it from final positions.

    The row is inserted now (a concurrent duplicate loses its race here, not at commit);
    inside a PostgreSQL batch its answer is written when the batch's positions are fixed.
    """
    running = transaction.current(conn)
    later = running is not None and running.answers_at_commit
    params = {"ws": workspace, "cid": command_id, "hash": body_hash, "status": status, "now": now_us}
    _REMEMBER.run(conn, {**params, "answer": "" if later else answer(identity)})
    if later:
        assert running is not None
        running.answer_at_commit(workspace, command_id, answer)
