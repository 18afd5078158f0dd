"""A command's reads done ahead for a whole PostgreSQL batch, in one statement.

Once a fast pass holds the guards its claims rely on (``held_locks``), what each claim
reads next no longer depends on another transaction, so the pass reads it for all of them
at once (``RowsAhead``). A row serves its command only while nothing in the batch may have
written what it read (``RowsAhead.keys``, ``KeySpans``); a forgotten row is no error, the
command reads for itself. File commands and the queue's pulls and transitions are read
ahead too. Why each rule holds: docs/architecture.md#postgresql-reads-ahead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from eventcoord import liveness
from eventcoord.store import stats
from eventcoord.store.postgres import batch
from eventcoord.store.postgres.held_locks import Lock
from eventcoord.store.prepared import Prepared


@dataclass(frozen=True, slots=True)
class RowsAhead:
    """What one command reads first once ``lock`` is held, which a batch may read ahead.

    ``statement`` reads for many commands: each parameter of ``params`` becomes a list (one
    entry per command, in one order), and each row starts with the 1-based ordinal of its
    command's entry. ``keys``: the rows it reads, as (table, key values). ``columns``:
    counters it returns, as (table, column, index in the row without its ordinal): a write
    that only adds to one (``Prepared(adds=…)``) moves the row rather than forgetting it.

    ``spread``: parameters whose value is a tuple of any length (a claim's probes): their
    entries of all commands are concatenated, and the parameter ``rn`` says whose each is
    (the command's ordinal). ``many``: the statement returns any number of rows per command
    (at least one), kept as a tuple of rows. ``cutoff``: the statement binds ``cutoff``,
    one value for all, the batch's liveness cutoff (``liveness.cutoff`` of the batch's
    clock and TTL, which every command of the batch decides with). ``first_under``: only
    the first command of the batch under its lock (or the guard it was noted through,
    ``Batch.guard_of``) is read ahead: the reads of the queue's commands, each of which
    forgets the reads made under its guard (:func:`forget_under`), so that a later one's
    would never serve. ``alone``: worth reading ahead for one command too (its own reads
    are several statements: the queue's), where others are read ahead only for two or more.
    """

    statement: Prepared
    params: tuple[tuple[str, Any], ...]
    keys: tuple[tuple[str, tuple[Any, ...]], ...]
    lock: Lock
    columns: tuple[tuple[str, str, int], ...] = ()
    spread: tuple[str, ...] = ()
    many: bool = False
    cutoff: bool = False
    first_under: bool = False
    alone: bool = False


def read_ahead(conn: Connection, wanted: Sequence[RowsAhead]) -> None:
    """Read, for the running fast pass, the rows of every command of ``wanted`` whose lock
    the pass holds (at least two of one statement: else each reads for itself)."""
    b = batch.current(conn)
    if b is None or not b.carry:
        return
    kinds: dict[Prepared, list[RowsAhead]] = {}
    under: set[tuple[str, ...]] = set()
    for r in wanted:
        if r.lock in b.locked and r not in b.rows_ahead:
            if r.first_under:
                guard = b.guard_of.get(r.lock, r.lock)
                if guard in under:
                    continue
                under.add(guard)
            kinds.setdefault(r.statement, []).append(r)
    for statement, reads in kinds.items():
        if len(reads) < 2 and not reads[0].alone:
            continue
        first = reads[0]
        values = [dict(r.params) for r in reads]
        params: dict[str, Any] = {
            name: [v[name] for v in values] for name, _ in first.params if name not in first.spread
        }
        for name in first.spread:
            params[name] = [x for v in values for x in v[name]]
        if first.spread:
            params["rn"] = [n for n, v in enumerate(values, 1) for _ in v[first.spread[0]]]
        if first.cutoff:
            params["cutoff"] = liveness.cutoff(b.now_us, b.ttl)
        rows = statement.rows(conn, params)
        stats.READS_AHEAD.inc(len(reads))
        if not first.many:
            for row in rows:
                b.hold_ahead(reads[int(row[0]) - 1], tuple(row[1:]))
            continue
        each: dict[int, list[tuple[Any, ...]]] = {}
        for row in rows:
            each.setdefault(int(row[0]), []).append(tuple(row[1:]))
        for n, of_one in each.items():
            b.hold_ahead(reads[n - 1], tuple(of_one))


def read(
    conn: Connection, wanted: RowsAhead, *, others_life_ok: bool = False, own: str | None = None
) -> tuple[Any, ...] | None:
    """The row read ahead for ``wanted``, if it still holds (else None: the command reads
    for itself).

    ``others_life_ok``: what it read stays true whatever signs of life the batch carries
    for sessions other than ``own`` (the command's session, None: none), so those do not
    keep it from serving (the queue's reads: the project's suspects are each re-read,
    locked, before they count, and a sign of life only makes a suspect live).
    """
    b = batch.current(conn)
    if b is None or not b.rows_ahead:
        return None
    if b.liveness is not None and (not others_life_ok or (own is not None and b.liveness.has(own))):
        return None
    row = b.rows_ahead.get(wanted)
    if row is not None:
        stats.READS_AHEAD_SERVED.inc()
    return row


def forget_under(conn: Connection, lock: Lock) -> None:
    """Forget every read ahead made under ``lock`` (its command's first lock): the running
    command holds it too and may write what they read, by keys they do not name.

    The queue's reads ahead name a project's items as one row of ``work_items``, while its
    writes name items by their ids (the events of an item do not say its project); every
    command that writes a project's items holds the project's guard first (or writes
    ``sessions``, ending a session, which forgets every read of sessions), so the reads it
    may change are the ones made under that guard (``store/postgres/ahead/queue.py``).
    """
    b = batch.current(conn)
    if b is not None and b.rows_ahead:
        b.forget_under(lock)


def revived(conn: Connection) -> frozenset[str]:
    """The sessions a sign of life of the running batch revived since its reads ahead."""
    b = batch.current(conn)
    return frozenset() if b is None else frozenset(b.revived)
