"""Reference matching: does one concrete file path match a pattern?

Written independently of the glob rules behind :func:`eventcoord.domain.paths.overlaps`,
so the two can be checked against each other.
"""

from __future__ import annotations

from eventcoord.domain.paths import charsets
from eventcoord.domain.paths.syntax import (
    CONTROL_RE,
    AnyChar,
    CharClass,
    Globstar,
    Lit,
    Star,
    Token,
    analyse,
)


def _is_file_path(path: str) -> bool:
    if not path or CONTROL_RE.search(path):
        return False
    return all(name not in ("", ".", "..") for name in path.split("/"))


def _segment_matches(tokens: str | tuple[Token, ...], name: str) -> bool:
    # Classic single-star backtracking: on a mismatch, let the most recent "*" absorb
    # one more character. Correct for "*" plus single-character tokens and O(n*m) at
    # worst, so hostile patterns like "*a*a*a*...b" cannot blow up the way a
    # backtracking regex would.
    ti = ni = 0
    star_ti = -1
    star_ni = 0
    while ni < len(name):
        token = tokens[ti] if ti < len(tokens) else None
        if isinstance(token, Star):
            star_ti = ti
            star_ni = ni
            ti += 1
        elif token is not None and (
            isinstance(token, AnyChar)
            or (isinstance(token, Lit) and token == name[ni])
            or (isinstance(token, CharClass) and charsets.contains(token.chars, ord(name[ni])))
        ):
            ti += 1
            ni += 1
        elif star_ti >= 0:
            ti = star_ti + 1
            star_ni += 1
            ni = star_ni
        else:
            return False
    return all(isinstance(t, Star) for t in tokens[ti:])


def matches(pattern: str, path: str) -> bool:
    """Return True when the concrete file path ``path`` matches ``pattern``.

    ``pattern`` is normalised first (:class:`PathError` if invalid). ``path`` is taken
    literally (no escapes) and must be a normalised file path; anything else (empty or
    ``.``/``..`` segments, leading or trailing ``/``, control characters) matches
    nothing. This is the reference semantics, written independently of the glob rules
    behind :func:`overlaps`.
    """
    segments = analyse(pattern)[1].segments
    if not _is_file_path(path):
        return False
    names = path.split("/")
    # Set of indices into ``names`` where the next pattern segment may start.
    positions = {0}
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if isinstance(segment, Globstar):
            if index == last:
                # A final "**" swallows the rest but needs at least one segment.
                return min(positions) < len(names)
            positions = set(range(min(positions), len(names) + 1))
        else:
            positions = {j + 1 for j in positions if j < len(names) and _segment_matches(segment, names[j])}
        if not positions:
            return False
    return len(names) in positions
