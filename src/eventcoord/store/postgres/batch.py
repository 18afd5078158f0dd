"""The state of one PostgreSQL group-commit transaction, kept on its connection.

The position counter is advanced once, at the batch's end (``store/postgres/writer.py``); until
then a command's events get *provisional* positions: far above any real one
(``PROVISIONAL_BASE``), unique to this database backend (its process id is part of them),
in append order. Read models written in the batch carry them; the end statement inserts the
staged events with their real positions and renumbers the read models. A provisional number
never leaves the transaction: answers are finished with a :data:`Resolve` after the counter
moved (``log.Pending``; docs/architecture.md#postgresql-group-commit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.util import await_

from eventcoord.store import transaction
from eventcoord.store.key_spans import KeySpans, SpansIndex
from eventcoord.store.log import advance_stream
from eventcoord.store.postgres.deferred_writes import DeferredWrites, has_spans, rows_meet
from eventcoord.store.transaction import Expected, Requeue, Resolve, Transaction

#: Provisional positions start here (real positions stay far below 2**62).
PROVISIONAL_BASE = 1 << 62
#: Room per backend process: a batch appends fewer events than this.
_PER_BACKEND = 1 << 24
_KEY = "eventcoord.batch"


class Batch(Transaction):
    """Provisional positions, staged events and deferred idempotency answers of a batch."""

    __slots__ = (
        "_ahead_by_lock",
        "_ahead_by_row",
        "_ahead_by_spans",
        "_ahead_by_table",
        "_moved_ahead",
        "_spans_index",
        "answers",
        "carry",
        "chained",
        "deferred",
        "events",
        "guard_of",
        "liveness",
        "lo",
        "locked",
        "mixed",
        "next",
        "now_us",
        "own",
        "pinned",
        "raw",
        "renumber",
        "revived",
        "rows_ahead",
        "sessions_read",
        "ttl",
        "usual_lock_timeout",
        "work_counts",
        "writes",
    )

    def __init__(self, raw: Any, backend_pid: int) -> None:
        #: The asyncpg connection the batch runs on (the same transaction as SQLAlchemy's).
        self.raw = raw
        self.lo = PROVISIONAL_BASE + backend_pid * _PER_BACKEND
        self.next = self.lo
        self.now_us = 0
        self.ttl = 0
        #: The connection's own ``lock_timeout``, restored before the batch's end.
        self.usual_lock_timeout = "0"
        #: Rows changed so far; a refused command that changed none needs no rollback.
        self.writes = 0
        #: Whether this transaction holds the position counter's lock already (an append
        #: with an expected version took it, see ``log.append``).
        self.pinned = False
        #: Staged events, column by column (the end statement takes arrays); a version is
        #: None when the end statement assigns it.
        self.events: tuple[list[str], list[str], list[int | None], list[str], list[str], list[str], list[int]] = (
            [],
            [],
            [],
            [],
            [],
            [],
            [],
        )
        #: Read-model writes not sent yet (``prepared.Prepared.write``): a statement, its
        #: arguments, and the rows it names by table (``DeferredWrites``). Those before
        #: ``own`` were made by earlier commands of a fast pass, carried to go with the next
        #: statement the batch sends.
        self.deferred = DeferredWrites()
        #: Where the running command's own deferred writes begin.
        self.own = 0
        #: Sessions rows read ahead for the pass's commands (``session_rows``), by session:
        #: the statement that read it, its workspace and the row. A statement that may write
        #: a row of ``sessions`` forgets it (or all, when it cannot say which).
        self.sessions_read: dict[str, tuple[Any, str, tuple[Any, ...]]] = {}
        #: Row locks the running fast pass holds (``held_locks``): a command that would
        #: take one again skips that statement.
        self.locked: set[tuple[str, ...]] = set()
        #: Of those noted through another row (``held_locks.lease_guard``, ``item_guard``),
        #: the guard locked: reads ahead made under one are forgotten with the guard's.
        self.guard_of: dict[tuple[str, ...], tuple[str, ...]] = {}
        #: Commands' reads done ahead for the pass (``rows_ahead``), by read; the sessions a
        #: sign of life revived since (live for their declarers).
        self.rows_ahead: dict[Any, tuple[Any, ...]] = {}
        #: The reads ahead by the rows they name, and by table (a write forgets those it
        #: may change without a walk of them all, :meth:`forget_rows_ahead`). Entries of
        #: reads already forgotten stay until the reads are dropped: forgetting one twice
        #: is nothing.
        self._ahead_by_row: dict[tuple[str, tuple[Any, ...]], list[Any]] = {}
        self._ahead_by_table: dict[str, list[Any]] = {}
        #: The reads ahead by the lock they were made under (``rows_ahead.forget_under``).
        self._ahead_by_lock: dict[tuple[str, ...], list[Any]] = {}
        #: The reads ahead that name rows of a table by ranges (``KeySpans``: file claims'
        #: probes), with that key: a write is compared with each (``rows_meet``).
        self._ahead_by_spans: dict[str, list[tuple[Any, tuple[Any, ...]]]] = {}
        #: Those reads indexed by their ranges (built when a write first looks, dropped when
        #: a read is added): the ones whose key is one ``KeySpans``, and the others.
        self._spans_index: dict[str, tuple[SpansIndex[Any], list[tuple[Any, tuple[Any, ...]]]]] = {}
        #: Whether the running command moved a row read ahead (a counter it added to):
        #: dropping its writes unsent must then drop every read ahead (:meth:`drop_own`).
        self._moved_ahead = False
        self.revived: set[str] = set()
        #: Whether a statement of the running command carried an earlier command's writes:
        #: if it failed, it cannot tell whose write it was.
        self.mixed = False
        #: (workspace, command_id, answer) of idempotency records whose answer is written at the end.
        self.answers: list[tuple[str, str, Callable[[Resolve], str]]] = []
        #: Tables with a position column a statement of the batch touched: only those can
        #: hold its provisional positions, so only those are renumbered at the end. None:
        #: a statement whose tables are not known ran, so every such table is.
        self.renumber: set[str] | None = set()
        #: Whether the running pass carries the sessions' signs of life to its end (the fast
        #: pass: a careful pass writes each command's own with it, inside its savepoint).
        self.carry = False
        #: The signs of life carried so far (``projections.sessions.Liveness``), written
        #: before anything reads the rows they change, and before the end statement
        #: (``statements.send_carried``). None: nothing carried.
        self.liveness: Any = None
        #: The changes to the sessions' counts of items in work carried so far, and each
        #: item's worker as the batch last saw it (``projections.sessions.WorkCounts``):
        #: written with the end statement, in one UPDATE of each row with the carried
        #: liveness (or alone, in a batch that appended nothing: a rebuild's replay).
        #: None: nothing carried.
        self.work_counts: Any = None
        #: Set when the last batch's COMMIT also began the next transaction (commands were
        #: waiting): the database clock and TTL its end statement read, and when
        #: (``time.monotonic()``). Not cleared by :meth:`reset`: it belongs to the connection.
        self.chained: tuple[int, int, float] | None = None

    def reset(self) -> None:
        """Forget everything (the transaction was rolled back)."""
        self.next = self.lo
        self.writes = 0
        self.pinned = False
        for column in self.events:
            column.clear()
        self.answers.clear()
        self.deferred.clear()
        self.own = 0
        self.mixed = False
        self.renumber = set()
        self.sessions_read.clear()
        self.locked.clear()
        self.guard_of.clear()
        self.drop_rows_ahead()
        self.revived.clear()
        self.liveness = None
        self.work_counts = None

    def hold_ahead(self, read: Any, row: tuple[Any, ...]) -> None:
        """Keep ``row``, read ahead for ``read`` (a ``rows_ahead.RowsAhead``), while it holds."""
        self.rows_ahead[read] = row
        self._ahead_by_lock.setdefault(self.guard_of.get(read.lock, read.lock), []).append(read)
        for table, key in read.keys:
            self._ahead_by_table.setdefault(table, []).append(read)
            if has_spans(key):
                self._ahead_by_spans.setdefault(table, []).append((read, key))
                self._spans_index.pop(table, None)
            else:
                self._ahead_by_row.setdefault((table, key), []).append(read)

    def drop_rows_ahead(self) -> None:
        """Forget every read ahead."""
        self.rows_ahead.clear()
        self._ahead_by_row.clear()
        self._ahead_by_table.clear()
        self._ahead_by_lock.clear()
        self._ahead_by_spans.clear()
        self._spans_index.clear()

    def forget_rows_ahead(
        self,
        writes_to: frozenset[str] | None,
        keys: dict[str, tuple[Any, ...]] | None,
        life: bool,
        added: dict[str, tuple[str, int]] | None = None,
        spans_at: dict[str, Any] | None = None,
        counts_work: bool = False,
    ) -> None:
        """A statement that may write ``writes_to`` (None: unknown tables), the rows ``keys``
        name there, runs or is deferred: forget the reads ahead it may change
        (``store/postgres/rows_ahead.py``).

        ``life``: it only raises one session's ``last_seen_us`` (a sign of life): that
        session counts as live for the declarers read ahead, and the reads whose caller it
        is are forgotten.

        ``added``: by table, the one column it changes in its keyed row, and by how much
        (``Prepared(adds=…)``): a read ahead that returns that column (``RowsAhead.columns``)
        is moved by as much instead of forgotten. Two claims of one project in a batch: the
        second no longer reads its project's count again after the first one's grant.

        ``spans_at``: by table, a ``KeySpans`` holding every row it changes there, where its
        key names them otherwise (``Prepared(at_spans=…)``): the reads ahead of ranges are
        compared with it (else a plain key cannot be told apart from a range: all forgotten).

        ``counts_work``: of ``sessions`` it only adds to ``active_items``, which no read ahead
        returns (``Prepared(counts_work=…)``): none of sessions is forgotten.
        """
        if writes_to is None:
            self.drop_rows_ahead()
            return
        for table in writes_to & self._ahead_by_table.keys():
            key = None if keys is None else keys.get(table)
            if table == "sessions" and life and key is not None:
                self.revived.add(key[0])
                continue
            if table == "sessions" and counts_work:
                continue
            add = None
            by_spans = self._ahead_by_spans.get(table, ())
            if key is None or table == "sessions":  # unknown rows, who declares what
                named: Sequence[Any] = self._ahead_by_table.get(table, ())
            elif has_spans(key):  # rows by ranges, or at keys it knows: the reads of ranges it meets
                if len(key) == 1 and isinstance(key[0], KeySpans):  # the usual case: a claim's keys
                    met = self._meeting(table, by_spans, key[0])
                else:
                    met = [r for r, spans in by_spans if rows_meet(spans, key)]
                by_table = self._ahead_by_table.get(table, ())
                if len(by_spans) < len(by_table):  # and any read of plain keys (not told apart)
                    spanned = {id(r) for r, _ in by_spans}
                    met += [r for r in by_table if id(r) not in spanned]
                named = met
            else:
                try:
                    named = self._ahead_by_row.get((table, key), ())
                except TypeError:  # a list among its values: no read ahead's key (hashable) is equal
                    named = ()
                add = None if added is None else added.get(table)  # the reads of that very row
                if by_spans:  # reads of ranges: compared with where its rows lie, if it says
                    at = None if spans_at is None else spans_at.get(table)
                    named = (
                        [*named, *(r for r, _ in by_spans)]
                        if at is None
                        else [*named, *self._meeting(table, by_spans, at)]
                    )
            for r in named:
                if add is not None and self._move_ahead(r, table, add):
                    continue
                self.rows_ahead.pop(r, None)

    def forget_under(self, lock: tuple[str, ...]) -> None:
        """Forget the reads ahead made under ``lock`` (``rows_ahead.forget_under``), or under a
        lock noted through it (``guard_of``)."""
        for r in self._ahead_by_lock.pop(lock, ()):
            self.rows_ahead.pop(r, None)

    def _meeting(self, table: str, by_spans: Sequence[tuple[Any, tuple[Any, ...]]], written: KeySpans) -> list[Any]:
        """The reads ahead of ranges of ``table`` that rows at ``written`` may lie in."""
        built = self._spans_index.get(table)
        if built is None:
            single = [(key[0], r) for r, key in by_spans if len(key) == 1]
            others = [(r, key) for r, key in by_spans if len(key) != 1]
            built = self._spans_index[table] = (SpansIndex(single), others)
        index, others = built
        met = index.meeting(written)
        if others:
            met += [r for r, key in others if rows_meet(key, (written,))]
        return met

    def _move_ahead(self, read: Any, table: str, add: tuple[str, int]) -> bool:
        """Add to the column of ``table`` that ``read`` returns; whether it returns it (and
        still holds)."""
        row = self.rows_ahead.get(read)
        if row is None:
            return True  # forgotten already
        column, delta = add
        for t, c, at in read.columns:
            if t == table and c == column:
                self.rows_ahead[read] = (*row[:at], (row[at] or 0) + delta, *row[at + 1 :])
                self._moved_ahead = True
                return True
        return False

    def touch(self, tables: frozenset[str] | None) -> None:
        """Note that a statement touching ``tables`` (None: unknown ones) ran in the batch.

        Kept when a command is rolled back to its savepoint: renumbering a table that holds
        none of the batch's positions costs a probe, never a wrong row.
        """
        if tables is None:
            self.renumber = None
        elif tables and self.renumber is not None:
            self.renumber |= tables

    def begin_command(self) -> tuple[int, int, int, int, bool]:
        """A command starts: the deferred writes so far are carried; where it stands (:meth:`rewind`)."""
        self.own = len(self.deferred)
        self.deferred.begin_command()
        self.mixed = False
        self._moved_ahead = False
        return self.mark()

    def drop_own(self) -> None:
        """Forget the running command's deferred writes, never sent (it failed), and the
        reads ahead if it moved one (they would count writes that never happen)."""
        self.deferred.truncate(self.own)
        if self._moved_ahead:
            self.drop_rows_ahead()

    def mark(self) -> tuple[int, int, int, int, bool]:
        """Where the batch stands before a command runs (see :meth:`rewind`)."""
        return self.next, len(self.events[0]), len(self.answers), self.writes, self.pinned

    def rewind(self, mark: tuple[int, int, int, int, bool]) -> None:
        """Undo a command rolled back to its savepoint: its positions go to the next one."""
        self.next, n_events, n_answers, self.writes, self.pinned = mark
        for column in self.events:
            del column[n_events:]
        del self.answers[n_answers:]
        self.deferred.clear()  # a command's own (a careful pass carries none), never sent
        self.own = 0
        if self._moved_ahead:
            self.drop_rows_ahead()
        self.liveness = None  # carried only in a pass without savepoints: none to keep
        self.work_counts = None

    def take(self, count: int) -> int:
        """Hand out ``count`` consecutive provisional positions; returns the first."""
        first = self.next
        self.next += count
        return first

    @property
    def appended(self) -> int:
        """Events staged so far."""
        return self.next - self.lo

    def last(self) -> int | None:
        """The newest provisional position handed out, if any."""
        return self.next - 1 if self.next > self.lo else None

    def resolver(self, base: int, versions: Sequence[int]) -> Resolve:
        """Provisional → real, once the counter moved from ``base``; ``versions`` in batch order."""
        return Resolve(self.lo, self.next, base - self.lo + 1, versions)

    # The running transaction, as the shared SQL sees it (``store/transaction.py``).

    answers_at_commit = True

    def positions(
        self, conn: Connection, workspace: str, counts: dict[str, int], expected: dict[str, Expected]
    ) -> tuple[dict[str, int | None], int]:
        """Provisional positions; the streams without an expected version get theirs at
        commit (:func:`_advance_pinned_streams`)."""
        versions = _advance_pinned_streams(conn, self, workspace, counts, expected)
        return versions, self.take(sum(counts.values()))

    def stage(self, rows: list[dict[str, Any]]) -> bool:
        """The end statement inserts them, with their real positions."""
        ws, stream, version, kind, data, meta, rec = self.events
        for row in rows:
            ws.append(row["workspace"])
            stream.append(row["stream"])
            version.append(row["version"])
            kind.append(row["type"])
            data.append(row["data"])
            meta.append(row["metadata"])
            rec.append(row["recorded_us"])
        self.writes += 1
        return True

    def last_position(self) -> int | None:
        return self.last()

    def reads_log(self) -> None:
        """The log read must see all of it: not so behind the batch's staged events."""
        if self.appended:
            raise Requeue("reads the log after this batch appended: runs first in the next batch")

    def clock(self) -> tuple[int, int] | None:
        """Read once per batch, with the TTL, in the batch's first statement."""
        return self.now_us, self.ttl

    def answer_at_commit(self, workspace: str, command_id: str, answer: Callable[[Resolve], str]) -> None:
        self.answers.append((workspace, command_id, answer))

    def wrote(self) -> None:
        self.writes += 1


_LOCK_COUNTER = "SELECT position FROM store_head WHERE id = 1 FOR UPDATE"


def _advance_pinned_streams(
    conn: Connection, b: Batch, workspace: str, counts: dict[str, int], expected: dict[str, Expected]
) -> dict[str, int | None]:
    """Inside a batch: move now only the heads of streams with an expected version.

    The others move in the batch's end statement, under the position counter's lock, and
    their events get their versions there (``None`` here). A stream with an expected
    version is checked now, so its command alone fails; the batch takes the counter's lock
    first (once), so that no end statement of another replica can move that head between
    this check and our commit. If the batch already staged events of that stream whose
    versions come at commit, the check would miss them: the command runs in the next batch.
    """
    pinned = sorted(s for s in counts if expected.get(s) is not None)
    if not pinned:
        return {}
    ws, streams, versions = b.events[0], b.events[1], b.events[2]
    if any(v is None and w == workspace and st in pinned for w, st, v in zip(ws, streams, versions, strict=True)):
        raise Requeue("a stream with an expected version has events of this batch without one")
    if not b.pinned:
        await_(b.raw.fetchval(_LOCK_COUNTER))
        b.pinned = True
    return {s: advance_stream(conn, workspace, s, counts[s], expected[s]) for s in pinned}


def current(conn: Connection) -> Batch | None:
    """The batch running on ``conn``, if any (PostgreSQL writer only)."""
    if conn.dialect.driver != "asyncpg":  # cheap, and SQLite's writer is the hot path too
        return None
    b: Batch | None = conn.info.get(_KEY)
    return b


def attach(conn: Connection, batch: Batch | None) -> None:
    """Make ``batch`` the one running on ``conn`` (None detaches), for the shared SQL too."""
    if batch is None:
        conn.info.pop(_KEY, None)
    else:
        conn.info[_KEY] = batch
    transaction.attach(conn, batch)
