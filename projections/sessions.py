"""Read model of agent sessions: identity, last sign of life, declared work, end."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET
from sqlalchemy import Boolean, Connection, bindparam, cast, literal_column, null, update
from sqlalchemy.types import NullType

from eventcoord.events import DENIALS, AgentEnded, AgentHeartbeat, AgentRegistered
from eventcoord.store.log import RecordedEvent
from eventcoord.store.prepared import Prepared

from .base import Appliers
from .tables import sessions

#: A session's declaring key on PostgreSQL: ``workspace chr(1) working_on`` until it ends,
#: NULL once ended or while it declares nothing; ``ix_sessions_declaring_key``
#: (0013_declaring_key) is on exactly this expression.
PG_DECLARING_KEY = (
    "(CASE WHEN sessions.ended_us IS NULL THEN sessions.workspace || E'\\x01' || sessions.working_on END)"
)


def declaring_key(workspace: str, issue: str) -> str:
    """The value of ``PG_DECLARING_KEY`` for the live sessions declaring ``issue``."""
    return f"{workspace}\x01{issue}"


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
        """Every event a session's accepted command appends counts as a heartbeat (SPEC §1)."""
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


_SETS_LAST_SEEN = (AgentRegistered, AgentHeartbeat, AgentEnded)

#: Heartbeats are not applied one by one: :class:`Liveness` folds them (``apply`` feeds it).
APPLIERS: Appliers = {AgentRegistered: registered, AgentEnded: ended}
