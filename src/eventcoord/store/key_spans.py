"""Rows named by ranges of an indexed key, so that a PostgreSQL batch can tell a read of
ranges apart from a deferred write of rows elsewhere (``DeferredWrites.apart``).

A read of file claims probes ranges of their live key; a claim's write inserts rows at
keys it knows. When no inserted key lies in a probed range, the write may go with the read
(as a CTE in front of it, which its snapshot does not see): the read's answer is the same.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class KeySpans:
    """Rows of one table named by the value of one indexed key: every row whose key lies in
    one of ``spans``, each ``[lo, hi)`` (``Prepared(rows={table: (param,)})`` with this
    object as ``param``'s value).

    A read of ranges of the key names its rows by the ranges; a write of rows whose keys it
    knows, by those keys (:meth:`points`). Two meet when a key may lie in both; strings
    compare by code point, as PostgreSQL's ``COLLATE "C"`` compares their UTF-8 bytes.
    """

    __slots__ = ("spans",)

    def __init__(self, spans: Iterable[tuple[str, str]]) -> None:
        self.spans = tuple(sorted(spans))

    @classmethod
    def points(cls, keys: Iterable[str]) -> KeySpans:
        """The rows whose key is one of ``keys`` (``[k, k + NUL)`` holds only ``k``)."""
        return cls((k, k + "\x00") for k in keys)

    def __eq__(self, other: object) -> bool:
        # By value: a read ahead is looked up by an equal one its command builds again
        # (``rows_ahead.RowsAhead``, a key of ``Batch.rows_ahead``).
        return isinstance(other, KeySpans) and self.spans == other.spans

    def __hash__(self) -> int:
        return hash(self.spans)

    def meets(self, other: KeySpans) -> bool:
        """Whether a key may lie in a span of each."""
        mine, theirs = self.spans, other.spans
        if len(theirs) == 1:  # the usual cases (a claim's key against probes), without a generator
            o_lo, o_hi = theirs[0]
            for lo, hi in mine:
                if lo >= o_hi:  # sorted: every span after it lies above too
                    return False
                if o_lo < hi:
                    return True
            return False
        if len(mine) == 1:
            return other.meets(self)
        return any(lo < o_hi and o_lo < hi for lo, hi in mine for o_lo, o_hi in theirs)


class SpansIndex(Generic[T]):
    """Things named by ``KeySpans``, found by the spans they meet without comparing each.

    A batch's file claims each read ranges ahead, and each claim's insert must find the
    reads whose ranges hold one of its keys: compared one by one, that was quadratic in the
    batch's claims. Here every span is sorted by its low end, with the highest high end so
    far beside it: the spans that may hold a key lie before the first low end above it,
    and the walk back stops once no span so far reaches the key.
    """

    __slots__ = ("_his", "_items", "_los", "_reach")

    def __init__(self, named: Iterable[tuple[KeySpans, T]]) -> None:
        pairs = list(named)
        spans = sorted((lo, hi, i) for i, (ks, _) in enumerate(pairs) for lo, hi in ks.spans)
        self._items = [item for _, item in pairs]
        self._los = [lo for lo, _, _ in spans]
        self._his = [(hi, i) for _, hi, i in spans]
        reach: list[str] = []
        for _, hi, _ in spans:
            reach.append(hi if not reach or hi > reach[-1] else reach[-1])
        #: The highest high end among the spans up to each one.
        self._reach = reach

    def meeting(self, other: KeySpans) -> list[T]:
        """The things whose spans meet ``other``'s, each once, in no set order."""
        found: dict[int, None] = {}
        los, his, reach = self._los, self._his, self._reach
        for o_lo, o_hi in other.spans:
            i = bisect_left(los, o_hi)  # spans before i start below o_hi
            while i > 0:
                i -= 1
                if reach[i] <= o_lo:  # none so far ends above o_lo
                    break
                hi, n = his[i]
                if hi > o_lo:
                    found[n] = None
        return [self._items[n] for n in found]
