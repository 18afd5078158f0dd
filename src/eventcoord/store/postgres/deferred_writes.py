"""The read-model writes a PostgreSQL batch has deferred, indexed by the rows they name.

A fast pass defers each command's read-model writes (``prepared.Prepared.write``) so they
ride on the batch's next statement; a write may go with a statement only when it changes
nothing that statement touches (:meth:`DeferredWrites.apart`), and a new one is checked the
same way against those before it. A batch of claims read ahead piles up hundreds of them,
so they are indexed by table and row rather than compared one by one; only writes that name
their rows by ranges (``KeySpans``) are (docs/architecture.md#prepared-statements-and-deferred-writes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from eventcoord.store.key_spans import KeySpans

#: A deferred write: its prebuilt statement (``prepared._Pg``), its arguments, and the rows
#: it names by table (None: it names none).
Entry = tuple[Any, list[Any], dict[str, tuple[Any, ...]] | None]


def rows_meet(mine: tuple[Any, ...], theirs: tuple[Any, ...]) -> bool:
    """Whether two statements' keys of one table may name a row in common."""
    if len(mine) == 1 and len(theirs) == 1 and isinstance(mine[0], KeySpans) and isinstance(theirs[0], KeySpans):
        return mine[0].meets(theirs[0])
    if has_spans(mine) or has_spans(theirs):
        return True  # spans and keys of another kind: they cannot be told apart
    return mine == theirs


def has_spans(key: tuple[Any, ...]) -> bool:
    """Whether ``key`` names rows by ranges (``KeySpans``)."""
    for k in key:  # noqa: SIM110 (a loop: no generator on this hot path)
        if isinstance(k, KeySpans):
            return True
    return False


class _TableWrites:
    """What the deferred writes of one table name there."""

    __slots__ = ("keys", "not_life", "odd", "unkeyed")

    def __init__(self) -> None:
        #: Rows named by a plain (hashable) key.
        self.keys: set[tuple[Any, ...]] = set()
        #: Keys holding spans, or unhashable ones: compared one by one.
        self.odd: list[tuple[Any, ...]] = []
        #: A write that names no row of this table (it may touch any).
        self.unkeyed = False
        #: A write that does more than raise one session's ``last_seen_us``.
        self.not_life = False


class DeferredWrites:
    """The deferred writes of a batch, in order, and an index of the rows they name."""

    __slots__ = ("_entries", "_starts", "_tables", "_unknown")

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._entries: list[Entry] = []
        #: Where each command's writes begin, past the first (:meth:`begin_command`).
        self._starts: list[int] = []
        self._tables: dict[str, _TableWrites] = {}
        #: A write whose tables are not known: it may touch anything.
        self._unknown = False
        for entry in entries:
            self.append(*entry)

    def begin_command(self) -> None:
        """The writes deferred from now on are another command's (:meth:`by_command`)."""
        n = len(self._entries)
        if n and (not self._starts or self._starts[-1] != n):
            self._starts.append(n)

    def by_command(self) -> Iterator[list[Entry]]:
        """The deferred writes, in order, one list per command that deferred any."""
        start = 0
        for end in (*self._starts, len(self._entries)):
            if end > start:
                yield self._entries[start:end]
            start = end

    def append(self, pg: Any, args: list[Any], keys: dict[str, tuple[Any, ...]] | None) -> None:
        """Defer one more write."""
        self._entries.append((pg, args, keys))
        self._index(pg, keys)

    def _index(self, pg: Any, keys: dict[str, tuple[Any, ...]] | None) -> None:
        if pg.writes_to is None:
            self._unknown = True
            return
        for table in pg.writes_to:
            t = self._tables.get(table)
            if t is None:
                t = self._tables[table] = _TableWrites()
            if not pg.life_only:
                t.not_life = True
            key = None if keys is None else keys.get(table)
            if key is None:
                t.unkeyed = True
            elif has_spans(key):
                t.odd.append(key)
            else:
                try:
                    t.keys.add(key)
                except TypeError:  # a list among the key's values
                    t.odd.append(key)

    def clear(self) -> None:
        """Forget every deferred write (sent, or rolled back)."""
        self._entries.clear()
        self._starts.clear()
        self._tables.clear()
        self._unknown = False

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` writes (a failed command's own are dropped)."""
        if length >= len(self._entries):
            return
        kept = self._entries[:length]
        starts = [i for i in self._starts if i < length]
        self.clear()
        for entry in kept:
            self.append(*entry)
        self._starts = starts

    def apart(self, pg: Any, keys: dict[str, tuple[Any, ...]] | None) -> bool:
        """Whether ``pg`` (with the rows ``keys`` names) touches nothing a deferred write may
        change: no table they share, or in each table they share other rows (both name
        theirs, and the keys differ)."""
        if self._unknown:
            return False
        for table in pg.tables:
            t = self._tables.get(table)
            if t is None:
                continue
            if table == "sessions":
                if pg.session_facts:
                    if t.not_life:
                        return False
                    continue  # a sign of life changes none of the facts it reads
                if pg.counts_pending_life and t.not_life:
                    return False  # it reads other sessions, counting only signs of life pending
            if keys is None or t.unkeyed:
                return False
            mine = keys.get(table)
            if mine is None:
                return False
            for theirs in t.odd:
                if rows_meet(mine, theirs):
                    return False
            if t.keys and _names_one_of(mine, t.keys):
                return False
        return True

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries)

    def __getitem__(self, index: int) -> Entry:
        return self._entries[index]


def _names_one_of(mine: tuple[Any, ...], plain: set[tuple[Any, ...]]) -> bool:
    """Whether ``mine`` may name a row one of the ``plain`` keys names."""
    if has_spans(mine):
        return True  # spans against plain keys cannot be told apart
    try:
        return mine in plain
    except TypeError:  # unhashable: compared one by one
        return any(mine == k for k in plain)
