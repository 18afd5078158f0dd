"""The hash chain over the log (docs/protocol.md#the-hash-chain).

An event's ``hash`` is the hex SHA-256 of the previous position's hash (the empty string
before position 1) followed by the event's canonical JSON: its ``/v1/events`` object
without ``hash``, keys sorted, no whitespace, UTF-8, ``ensure_ascii=False``. The store keeps
the hashes in ``event_hashes``, filled off the command path (``history/chainer.py``); a read
of the log serves them from there and computes, without storing, those not chained yet.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import msgspec
from sqlalchemy import Connection, select, text

from eventcoord.codec import WireEvent, format_time
from eventcoord.store.schema import event_hashes, events

#: The hash "before position 1".
GENESIS = ""
#: Event types whose data may hold floats (free-form JSON): their canonical form is made by
#: the ``json`` module itself, whose float spelling (``1e+16``) msgspec does not share.
_FREE_FORM = frozenset({"WorkEnqueued"})
_ROW_COLUMNS = (
    events.c.position,
    events.c.stream,
    events.c.version,
    events.c.type,
    events.c.data,
    events.c.metadata,
    events.c.recorded_us,
)
_decode = msgspec.json.decode
_encode = msgspec.json.encode


def canonical(obj: dict[str, Any]) -> bytes:
    """The canonical JSON of an event object (``hash`` left out), exactly as the formula says."""
    body = {k: v for k, v in obj.items() if k != "hash"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def link(prev: str, canonical_json: bytes) -> str:
    """The hash of an event: SHA-256 of the previous hash followed by its canonical JSON."""
    return hashlib.sha256(prev.encode() + canonical_json).hexdigest()


def wire_object(ev: WireEvent) -> dict[str, Any]:
    """A wire event as the plain object ``/v1/events`` answers (without ``hash``)."""
    return {
        "position": ev.position,
        "stream": ev.stream,
        "version": ev.version,
        "type": ev.type,
        "data": json.loads(bytes(ev.data)),
        "metadata": json.loads(bytes(ev.metadata)),
        "recorded_at": ev.recorded_at,
    }


def _row_canonical(r: Sequence[Any]) -> bytes:
    """The canonical JSON of a stored row (:data:`_ROW_COLUMNS`).

    msgspec's sorted encoding spells strings, integers, booleans and nulls as ``json.dumps``
    does (``tests/unit/test_chain_formula.py``) at a fraction of its cost; free-form data goes the slow way.
    """
    obj = {
        "position": r[0],
        "stream": r[1],
        "version": r[2],
        "type": r[3],
        "data": _decode(r[4]),
        "metadata": _decode(r[5]),
        "recorded_at": format_time(r[6]),
    }
    if r[3] in _FREE_FORM:
        obj["data"] = json.loads(r[4])
        return canonical(obj)
    return _encode(obj, order="sorted")


class Broken(ValueError):
    """The chain breaks at ``position``: ``reason`` says how."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"position {position}: {reason}")
        self.position = position
        self.reason = reason


def links(prev: str, after: int, rows: Iterable[Sequence[Any]]) -> Iterator[tuple[int, str]]:
    """``(position, hash)`` of stored rows following ``after`` (whose hash is ``prev``), in order.

    A row that does not follow the one before it (a missing position) is :class:`Broken`.
    """
    for r in rows:
        if r[0] != after + 1:
            raise Broken(after + 1, f"missing from the log (the next event is at {r[0]})")
        prev = link(prev, _row_canonical(r))
        after = r[0]
        yield after, prev


def tip(conn: Connection) -> tuple[int, str] | None:
    """The newest chained position and its hash (None: nothing chained)."""
    row = conn.execute(
        select(event_hashes.c.position, event_hashes.c.hash).order_by(event_hashes.c.position.desc()).limit(1)
    ).first()
    return None if row is None else (int(row[0]), str(row[1]))


def _start(conn: Connection) -> tuple[int, str]:
    """Where chaining goes on: the tip, or before the log's first event.

    A log whose first event is past position 1 (archived before the chain existed) starts
    its chain there from :data:`GENESIS` (docs/history.md#the-hash-chain).
    """
    t = tip(conn)
    if t is not None:
        return t
    first = conn.execute(select(events.c.position).order_by(events.c.position).limit(1)).scalar()
    return (0 if first is None else int(first) - 1), GENESIS


def _rows(conn: Connection, after: int, upto: int | None, limit: int) -> list[Any]:
    stmt = select(*_ROW_COLUMNS).where(events.c.position > after)
    if upto is not None:
        stmt = stmt.where(events.c.position <= upto)
    return list(conn.execute(stmt.order_by(events.c.position).limit(limit)))


def next_links(conn: Connection, limit: int, start: tuple[int, str] | None = None) -> list[tuple[int, str]]:
    """The next ``limit`` links after ``start`` (default: the stored tip), computed from the log, not stored."""
    after, prev = start or _start(conn)
    return list(links(prev, after, _rows(conn, after, None, limit)))


_STORE_PG = text(
    "INSERT INTO event_hashes (position, hash) SELECT * FROM unnest(CAST(:p AS bigint[]), CAST(:h AS text[]))"
    " ON CONFLICT (position) DO NOTHING"
)
_STORE_SQLITE = "INSERT OR IGNORE INTO event_hashes (position, hash) VALUES (?, ?)"


def store_links(conn: Connection, new: Sequence[tuple[int, str]]) -> None:
    """Store links; a position already chained (by another replica) keeps its row.

    One statement on the driver, its rows as plain tuples (PostgreSQL: two arrays): on SQLite
    it runs on the server's one writer, so it costs a row what the driver costs, no more.
    """
    if not new:
        return
    if conn.dialect.name == "postgresql":
        conn.execute(_STORE_PG, {"p": [p for p, _ in new], "h": [h for _, h in new]})
    else:
        conn.exec_driver_sql(_STORE_SQLITE, [(p, h) for p, h in new])


PAGE = 5000


def chain_all(conn: Connection, upto: int | None = None) -> int:
    """Chain every event (up to ``upto``) not chained yet, in this transaction (migrations, archives)."""
    n = 0
    while True:
        after, prev = _start(conn)
        new = list(links(prev, after, _rows(conn, after, upto, PAGE)))
        if not new:
            return n
        store_links(conn, new)
        n += len(new)


def hashes_of(conn: Connection, positions: Sequence[int]) -> dict[int, str]:
    """The hash of each position (ascending): stored ones, the rest computed from the tip."""
    if not positions:
        return {}
    out = {
        int(p): str(h)
        for p, h in conn.execute(
            select(event_hashes.c.position, event_hashes.c.hash).where(event_hashes.c.position.in_(list(positions)))
        )
    }
    missing = [p for p in positions if p not in out]
    if missing:
        # Not chained yet (the chainer runs behind the commits): compute from the tip on.
        after, prev = _start(conn)
        want = set(missing)
        top = max(missing)
        with contextlib.suppress(Broken):  # a damaged log: its pages go on, without the hashes past the break
            while after < top:
                rows = _rows(conn, after, top, PAGE)
                if not rows:
                    break
                for p, h in links(prev, after, rows):
                    if p in want:
                        out[p] = h
                    after, prev = p, h
    return out


def with_hashes(conn: Connection, page: list[WireEvent]) -> list[WireEvent]:
    """A page of the log with each event's ``hash``."""
    hashes = hashes_of(conn, [e.position for e in page])
    return [msgspec.structs.replace(e, hash=hashes.get(e.position)) for e in page]


def verify_stored(conn: Connection) -> tuple[int, Broken | None]:
    """Recompute the stored chain from the log: ``(events checked, the first break or None)``.

    Every stored hash must equal the one recomputed from the events; only a suffix of the
    log (what the chainer has not reached yet) may lack one.
    """
    first = conn.execute(select(events.c.position).order_by(events.c.position).limit(1)).scalar()
    if first is None:
        return 0, None
    after = int(first) - 1
    anchor = conn.execute(select(event_hashes.c.hash).where(event_hashes.c.position == after)).scalar()
    prev = GENESIS if anchor is None else str(anchor)
    if anchor is None and after > 0:
        # A log that starts past position 1 with nothing before it (a partial replay): its
        # first link is taken as given, as ``eventcoord verify`` takes a partial file's.
        given = conn.execute(select(event_hashes.c.hash).where(event_hashes.c.position == after + 1)).scalar()
        if given is not None:
            after += 1
            prev = str(given)
    n = 0
    unchained_from: int | None = None
    while True:
        stmt = (
            select(*_ROW_COLUMNS, event_hashes.c.hash)
            .select_from(events.outerjoin(event_hashes, event_hashes.c.position == events.c.position))
            .where(events.c.position > after)
            .order_by(events.c.position)
            .limit(PAGE)
        )
        rows = list(conn.execute(stmt))
        if not rows:
            break
        try:
            for r, (p, h) in zip(rows, links(prev, after, rows), strict=False):
                stored = r[7]
                if stored is None:
                    unchained_from = p if unchained_from is None else unchained_from
                elif unchained_from is not None:
                    return n, Broken(unchained_from, "has no stored hash while later events have one")
                elif stored != h:
                    return n, Broken(p, "its stored hash differs from the one its event and its predecessor give")
                after, prev = p, h
                n += 1
        except Broken as b:
            return n, b
    beyond = conn.execute(select(event_hashes.c.position).where(event_hashes.c.position > after).limit(1)).scalar()
    if beyond is not None:
        return n, Broken(int(beyond), "has a stored hash but no event")
    return n, None
