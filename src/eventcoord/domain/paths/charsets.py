"""Character sets for the path matcher: sorted, disjoint intervals of code points.

A set is a tuple of non-adjacent inclusive ``(lo, hi)`` intervals. Keeping sets canonical
makes them hashable cache keys and lets equality mean set equality.
"""

from __future__ import annotations

import bisect
from typing import Final

MAX_CODE_POINT: Final = 0x10FFFF
DOT: Final = ord(".")

Interval = tuple[int, int]
CharSet = tuple[Interval, ...]

# Every character that may appear inside a file path segment: everything except "/", the
# control characters and the invisible ones (bidirectional controls, zero-width characters)
# rejected by normalise_path. Wildcards and classes are intersected with this set so that
# "can match some character" means "can match some character of a valid path".
SEGMENT_CHARS: Final[CharSet] = (
    (0x20, 0x2E),
    (0x30, 0x7E),
    (0xA0, 0x200A),
    (0x200E, 0x2029),
    (0x202F, 0x2065),
    (0x206A, 0xFEFE),
    (0xFF00, MAX_CODE_POINT),
)
DOT_ONLY: Final[CharSet] = ((DOT, DOT),)


def canonical(intervals: list[Interval]) -> CharSet:
    """The canonical set of any intervals (sorted, overlapping and adjacent ones merged)."""
    merged: list[Interval] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return tuple(merged)


def complement(cs: CharSet) -> CharSet:
    """Every code point not in ``cs``."""
    out: list[Interval] = []
    nxt = 0
    for lo, hi in cs:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return tuple(out)


def intersect(a: CharSet, b: CharSet) -> CharSet:
    """The code points in both sets."""
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def meets(a: CharSet, b: CharSet) -> bool:
    """Do the sets share a code point? (``intersect`` without building it.)"""
    i = j = 0
    while i < len(a) and j < len(b):
        if max(a[i][0], b[j][0]) <= min(a[i][1], b[j][1]):
            return True
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return False


def contains(cs: CharSet, code: int) -> bool:
    """Is ``code`` in ``cs``? (A binary search: a class may hold hundreds of intervals.)"""
    i = bisect.bisect_right(cs, (code, MAX_CODE_POINT + 1)) - 1
    return i >= 0 and cs[i][1] >= code
