"""Read model of agent sessions: identity, last sign of life, declared work, end."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import UNSET
from sqlalchemy import Boolean, Connection, bindparam, cast, func, literal_column, null, select, update
from sqlalchemy.types import NullType

from eventcoord.domain.queue.state import ACTIVE
from eventcoord.events import (
    DENIALS,
    AgentEnded,
    AgentHeartbeat,
    AgentRegistered,
    WorkClaimed,
    WorkFinished,
    WorkRequeued,
)
from eventcoord.store import transaction
from eventcoord.store.log import RecordedEvent
from eventcoord.store.prepared import Prepared

from . import keys
from .base import Appliers
from .tables import session_work, sessions, work_items

#: The row of ``session_work`` these statements name (``Prepared(rows=…)``).
_WORK_ROW: dict[str, tuple[str, ...]] = {"session_work": ("item",)}

#: A session's declaring key on PostgreSQL (``keys.DECLARING``): ``ix_sessions_declaring_key``
#: (0013_declaring_key) is on exactly this expression; ``declaring_key`` builds its values.
PG_DECLARING_KEY = keys.DECLARING.sql()
declaring_key = keys.declaring_key


_REGISTER = Prepared(
    lambda d: sessions.insert().values(
        {
            **{
                c.name: bindparam(c.name)
                for c in sessions.columns
                if c.name not in ("stable", "ended_us", "heartbeats", "active_items")
            },
            # A boolean the drivers take as is (no SQLAlchemy bind processing), as in files.py.
            "stable": cast(bindparam("stable", type_=NullType()), Boolean),
            "ended_us": null(),
            "heartbeats": literal_column("0"),
            "active_items": literal_column("0"),
        }
    )
)


def registered(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, AgentRegistered)
    _REGISTER.write(
        conn,
        {
            "session_id": e.session_id,
            "workspace": r.metadata.workspace,
            "actor_key": e.actor_key,
            "identity_source": e.identity_source,
            "stable": e.stable,
            "kind": e.kind,
            "host": e.host,
            "runtime": e.runtime,
            "registered_us": r.recorded_us,
            "last_seen_us": r.recorded_us,
            "working_on": e.working_on,
            "token_id": e.token_id,
        },
    )


_HEARTBEAT = Prepared(
    lambda d: (
        update(sessions)
        .where(sessions.c.session_id == bindparam("sid"))
        .values(last_seen_us=bindparam("seen"), heartbeats=sessions.c.heartbeats + bindparam("n"))
    ),
    session_row="sid",
)
_HEARTBEAT_DECLARING = Prepared(
    lambda d: (
        update(sessions)
        .where(sessions.c.session_id == bindparam("sid"))
        .values(
            last_seen_us=bindparam("seen"),
            heartbeats=sessions.c.heartbeats + bindparam("n"),
            working_on=bindparam("working_on"),
        )
    ),
    session_row="sid",
)
_SIGN_OF_LIFE = Prepared(
    lambda d: (
        update(sessions)
        .where(
            (sessions.c.session_id == bindparam("sid"))
            & sessions.c.ended_us.is_(None)
            & (sessions.c.last_seen_us < bindparam("seen"))
        )
        .values(last_seen_us=bindparam("seen"))
    ),
    session_row="sid",
    life_only=True,
)


class _Pending:
    """One session's heartbeats and signs of life not yet written, folded.

    A heartbeat sets ``last_seen_us`` (and counts, and may declare ``working_on``); a sign
    of life raises ``last_seen_us`` if the session has not ended. Applied in order to one
    row, a run of them equals: the heartbeats counted at once with the last one's time and
    the last declaration, then one sign of life with the greatest time among those after
    the last heartbeat (the earlier ones are overwritten by it).
    """

    __slots__ = ("after", "beats", "declared", "seen", "working_on")

    def __init__(self) -> None:
        self.beats = 0
        self.seen = 0
        self.declared = False
        self.working_on: str | None = None
        self.after = 0  # greatest sign of life since the last heartbeat (0: none)

    def write(self, conn: Connection, sid: str) -> None:
        if self.beats:
            params = {"sid": sid, "seen": self.seen, "n": self.beats}
            if self.declared:
                _HEARTBEAT_DECLARING.write(conn, {**params, "working_on": self.working_on})
            else:
                _HEARTBEAT.write(conn, params)
        if self.after:
            _SIGN_OF_LIFE.write(conn, {"sid": sid, "seen": self.after})


def _write_many(conn: Connection, pending: dict[str, _Pending]) -> None:
    """Every session's pending writes, each statement once with many parameter sets.

    A session's heartbeat goes before its sign of life (all heartbeats, then all signs);
    sessions are independent rows, so nothing else about the order matters.
    """
    plain = [{"sid": sid, "seen": p.seen, "n": p.beats} for sid, p in pending.items() if p.beats and not p.declared]
    declaring = [
        {"sid": sid, "seen": p.seen, "n": p.beats, "working_on": p.working_on}
        for sid, p in pending.items()
        if p.beats and p.declared
    ]
    signs = [{"sid": sid, "seen": p.after} for sid, p in pending.items() if p.after]
    for stmt, params in ((_HEARTBEAT, plain), (_HEARTBEAT_DECLARING, declaring), (_SIGN_OF_LIFE, signs)):
        if params:
            stmt.many(conn, params)


#: PostgreSQL: what ``_write_many`` writes, as one statement over arrays (``$1…$6``), so a
#: batch's end statement can carry it (``pg_writer.end_statement``). Per session: the
#: heartbeats counted, the last one's time and declaration, then the sign of life after.
_LIVENESS_SET = (
    "UPDATE sessions AS s SET heartbeats = s.heartbeats + v.n,"
    " working_on = CASE WHEN v.declared THEN v.working_on ELSE s.working_on END,"
    " last_seen_us = CASE"
    " WHEN v.after > 0 AND s.ended_us IS NULL"
    " AND v.after > (CASE WHEN v.n > 0 THEN v.seen ELSE s.last_seen_us END) THEN v.after"
    " WHEN v.n > 0 THEN v.seen ELSE s.last_seen_us END"
)
#: Each pending row's session, probed by its key (``{columns}``: the pending rows' names): the
#: row is then updated by its position (``ctid``). Joined to ``sessions`` by the key, a generic
#: plan made without statistics hashed the whole table (a heartbeat with 3,000 more sessions
#: cost 1.3 times as much, ``bench/history.py --tiers``); a lateral probe is one index
#: search whatever the statistics, and a row found by its position, one read. Each row is
#: locked by this transaction already (see ``as_arrays``), so its position stands.
_BY_KEY = (
    " FROM (SELECT p.*, t.loc FROM unnest({arrays}) AS p({columns}) CROSS JOIN LATERAL"
    " (SELECT ctid AS loc FROM sessions WHERE sessions.session_id = p.sid OFFSET 0) AS t) AS v WHERE s.ctid = v.loc"
)
_LIVENESS_ARRAYS = _LIVENESS_SET + _BY_KEY.format(
    arrays="$1::varchar[], $2::bigint[], $3::bigint[], $4::boolean[], $5::varchar[], $6::bigint[]",
    columns="sid, n, seen, declared, working_on, after",
)
#: The same with the changes to the sessions' counts of items in work (``$7``; the queue
#: projection's ``WorkCounts``): one UPDATE of each row either touches.
_LIVENESS_AND_WORK_ARRAYS = (
    _LIVENESS_SET
    + ", active_items = s.active_items + v.work"
    + _BY_KEY.format(
        arrays="$1::varchar[], $2::bigint[], $3::bigint[], $4::boolean[], $5::varchar[], $6::bigint[], $7::int[]",
        columns="sid, n, seen, declared, working_on, after, work",
    )
)
#: The changes to the sessions' counts of items in work alone (``$1``, ``$2``).
WORK_ARRAYS = "UPDATE sessions AS s SET active_items = s.active_items + v.work" + _BY_KEY.format(
    arrays="$1::varchar[], $2::int[]", columns="sid, work"
)


class Liveness:
    """The ``sessions`` rows' signs of life of one ``apply`` call, folded per session.

    ~85 % of a log is heartbeats, and nearly every other event is a sign of life of its
    session: one UPDATE each would dominate a replay (and, on PostgreSQL, pile up row
    versions in a rebuild's one transaction). They only touch their own session's row, and
    nothing else an applier does reads ``last_seen_us``, ``heartbeats`` or ``working_on``,
    so they are kept here per session and written by :meth:`flush`: before any other
    applier touches that session's row (register, end), and at the end of the call. The
    rows then hold exactly what one UPDATE per event would have left.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}

    def heartbeat(self, r: RecordedEvent) -> None:
        e = r.event
        assert isinstance(e, AgentHeartbeat)
        p = self._pending.get(e.session_id)
        if p is None:
            p = self._pending[e.session_id] = _Pending()
        p.beats += 1
        p.seen = r.recorded_us
        p.after = 0
        if e.working_on is not UNSET:  # absent keeps the declaration, null clears it
            p.declared = True
            p.working_on = e.working_on

    def sign_of_life(self, r: RecordedEvent) -> None:
        """Every event a session's accepted command appends counts as a heartbeat (docs/protocol.md#liveness)."""
        sid = r.metadata.session_id
        # Session events set last_seen themselves; denials are not signs of life.
        if sid is None or isinstance(r.event, _SETS_LAST_SEEN) or r.type in DENIALS:
            return
        p = self._pending.get(sid)
        if p is None:
            p = self._pending[sid] = _Pending()
        p.after = max(p.after, r.recorded_us)

    def __len__(self) -> int:
        """Sessions with something pending."""
        return len(self._pending)

    def has(self, sid: str) -> bool:
        """Whether something is pending for session ``sid``."""
        return sid in self._pending

    def as_arrays(self, work: dict[str, int] | None = None) -> tuple[str, list[Any]]:
        """Everything pending as one PostgreSQL statement and its arguments; forgets it.
        ``work``: with these changes to sessions' counts of items in work, by session.

        Only for rows the transaction already holds locked (a batch's carried heartbeats:
        each was locked by its own read): the statement then waits for no lock.
        """
        items = list(self._pending.items())
        self._pending.clear()
        if work:  # the sessions whose counts change, with nothing pending of their liveness
            pending, nothing = {sid for sid, _ in items}, _Pending()
            items += [(sid, nothing) for sid in work if sid not in pending]
        columns: list[Any] = [
            [sid for sid, _ in items],
            [p.beats for _, p in items],
            [p.seen for _, p in items],
            [p.declared for _, p in items],
            [p.working_on for _, p in items],
            [p.after for _, p in items],
        ]
        if not work:
            return _LIVENESS_ARRAYS, columns
        return _LIVENESS_AND_WORK_ARRAYS, [*columns, [work.get(sid, 0) for sid, _ in items]]

    def flush(self, conn: Connection, sid: str | None = None) -> None:
        """Write what is pending (of one session, or all)."""
        if sid is None:
            if len(self._pending) == 1:
                [(key, pending)] = self._pending.items()
                pending.write(conn, key)
            elif self._pending:
                _write_many(conn, self._pending)
            self._pending.clear()
            return
        one = self._pending.pop(sid, None)
        if one is not None:
            one.write(conn, sid)


_END = Prepared(
    lambda d: (
        update(sessions)
        .where(sessions.c.session_id == bindparam("sid"))
        .values(ended_us=bindparam("at"), last_seen_us=bindparam("at2"), working_on=null())
    ),
    session_row="sid",
)


def ended(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, AgentEnded)
    _END.write(conn, {"sid": e.session_id, "at": r.recorded_us, "at2": r.recorded_us})


# ``sessions.active_items``, the items a session works on (claimed or running): the queue's
# stale workers are found among the sessions that work on something (0018_stale_workers).
# This projection keeps it from the queue's events, with ``session_work``, each item in work
# and its worker: a claim adds the item and one to its worker; a re-queue removes it and
# takes one from its worker (its event names the worker); a finish takes one from the
# worker ``session_work`` names, if the item was in work (its event names who finished it:
# an admin may finish another's item, or cancel a queued one), and removes it. So this
# projection reads only its own tables: a rebuild, a check or a replay of it alone keeps the
# counts. Nothing the appliers do reads ``active_items``: a PostgreSQL batch's fast pass
# carries the changes to its end statement (``WorkCounts``).
_WORKER_COUNT = Prepared(
    lambda d: (
        update(sessions)
        .where(sessions.c.session_id == bindparam("sid"))
        .values(active_items=sessions.c.active_items + bindparam("delta"))
    ),
    session_row="sid",
    counts_work=True,
)
_ITEM_WORKER_DONE = Prepared(
    lambda d: (
        update(sessions)
        .where(
            sessions.c.session_id
            == select(session_work.c.session_id).where(session_work.c.item_id == bindparam("item")).scalar_subquery()
        )
        .values(active_items=sessions.c.active_items - literal_column("1"))
    ),
    rows=_WORK_ROW,
    counts_work=True,
)
_WORK_TAKEN = Prepared(
    lambda d: session_work.insert().values(
        item_id=bindparam("item"), workspace=bindparam("ws"), session_id=bindparam("sid")
    ),
    rows=_WORK_ROW,
)
_WORK_LEFT = Prepared(
    lambda d: session_work.delete().where(session_work.c.item_id == bindparam("item")), rows=_WORK_ROW
)


class WorkCounts:
    """The changes to ``sessions.active_items`` a PostgreSQL batch's fast pass carries, per session.

    Every claim, finish and re-queue changes its worker's count; written one by one they
    are deferred writes of ``sessions`` rows, which keep a batch's other writes and reads
    of those rows from going together (a row may be written once per statement). Carried
    instead, they ride on the batch's end statement, with its carried liveness (one UPDATE
    of each row, ``sessions.Liveness.as_arrays``). Each row they change is one the batch
    holds locked (a claim's and a finish's caller, read locked; a recovery's stale workers,
    locked before their items are; an admin's finish of another's item locks that worker,
    ``handlers.queue.finish_work``), so under the counter's lock they wait for no one.

    A finish's worker is the item's ``session_id`` as the batch last saw it
    (``workers``): as its command read it, locked (:func:`note_worker`), then as the
    batch's claims and re-queues of it set it.
    """

    __slots__ = ("deltas", "workers")

    def __init__(self) -> None:
        self.deltas: dict[str, int] = {}
        #: By item: its worker as the batch last saw it (None: no one's).
        self.workers: dict[str, str | None] = {}

    def __bool__(self) -> bool:
        """Whether a count changes."""
        return bool(self.deltas)

    def add(self, session_id: str, delta: int) -> None:
        """``session_id`` gained (1) or lost (-1) an item in work."""
        self.deltas[session_id] = self.deltas.get(session_id, 0) + delta

    def as_arrays(self, liveness: Liveness | None = None) -> tuple[str, list[Any]]:
        """One statement writing these (and ``liveness``, forgotten then) and its arguments."""
        if liveness is not None:
            return liveness.as_arrays(self.deltas)
        return WORK_ARRAYS, [list(self.deltas), list(self.deltas.values())]


def _carried_counts(conn: Connection, write: bool = True) -> WorkCounts | None:
    """The running PostgreSQL batch's carried counts (begun if none), in a fast pass;
    carrying counts as a write (a refusal after it rolls the pass back). None: write now."""
    b = transaction.current(conn)
    if b is None or not b.carry:
        return None
    counts: WorkCounts | None = b.work_counts
    if counts is None:
        counts = b.work_counts = WorkCounts()
    if write:
        b.wrote()
    return counts


def note_worker(conn: Connection, item_id: str, session_id: str | None) -> None:
    """A command read ``item_id`` locked, with ``session_id`` as its worker: in a PostgreSQL
    batch's fast pass its finish takes one from that worker without reading ``session_work``."""
    counts = _carried_counts(conn, write=False)
    if counts is not None:
        counts.workers[item_id] = session_id


def _change_count(conn: Connection, session_id: str, delta: int) -> None:
    counts = _carried_counts(conn)
    if counts is None:
        _WORKER_COUNT.write(conn, {"sid": session_id, "delta": delta})
    else:
        counts.add(session_id, delta)


def work_claimed(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkClaimed)
    _WORK_TAKEN.write(conn, {"item": e.item_id, "ws": r.metadata.workspace, "sid": e.session_id})
    _change_count(conn, e.session_id, 1)
    note_worker(conn, e.item_id, e.session_id)


def work_requeued(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkRequeued)
    _WORK_LEFT.write(conn, {"item": e.item_id})
    if e.session_id is not None:  # (always: only an item in work is re-queued, and its event names its worker)
        _change_count(conn, e.session_id, -1)
    note_worker(conn, e.item_id, None)


def work_finished(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkFinished)
    counts = _carried_counts(conn)
    if counts is None or e.item_id not in counts.workers:  # its worker, read from session_work
        _ITEM_WORKER_DONE.write(conn, {"item": e.item_id})
    else:  # its worker as the batch last saw it
        worker = counts.workers.pop(e.item_id)
        if worker is not None:
            counts.add(worker, -1)
    _WORK_LEFT.write(conn, {"item": e.item_id})


def count_work_of_snapshot(conn: Connection, work_item_rows: Sequence[Sequence[Any]]) -> None:
    """The items in work and each session's count of them, from a snapshot's work items.

    For read models restored from a snapshot written before 0018_stale_workers (a rebuild
    after an archive, a history scratch): it has neither ``session_work`` rows nor counts.
    The rows are the snapshot's, not the table's: a rebuild of the sessions projection alone
    leaves ``work_items`` at the log's head. (Where no item was in work, this finds none.)
    """
    cols = [c.name for c in work_items.columns]
    item, ws, status, sid = (cols.index(n) for n in ("item_id", "workspace", "status", "session_id"))
    rows = [
        {"item_id": r[item], "workspace": r[ws], "session_id": r[sid]}
        for r in work_item_rows
        if r[status] in ACTIVE and r[sid] is not None
    ]
    if rows:
        conn.execute(session_work.insert(), rows)
    conn.execute(_COUNT_ALL_WORK)


_COUNT_ALL_WORK = update(sessions).values(
    active_items=select(func.count()).where(session_work.c.session_id == sessions.c.session_id).scalar_subquery()
)


_SETS_LAST_SEEN = (AgentRegistered, AgentHeartbeat, AgentEnded)

#: Heartbeats are not applied one by one: :class:`Liveness` folds them (``apply`` feeds it).
APPLIERS: Appliers = {
    AgentRegistered: registered,
    AgentEnded: ended,
    WorkClaimed: work_claimed,
    WorkRequeued: work_requeued,
    WorkFinished: work_finished,
}
