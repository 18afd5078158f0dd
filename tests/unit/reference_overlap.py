"""An independent exact oracle for overlap: the product of two character automata.

The matcher's previous algorithm, kept only to check the new one: each pattern is an
epsilon-free NFA over characters plus a separator, and two patterns overlap when the
product of both, run with a track of path validity, accepts a word. Exact, but its cost
grows with the product of the patterns' lengths (hence it was replaced); used here on
patterns short enough for that not to matter.
"""

from __future__ import annotations

from eventcoord.domain.paths import charsets
from eventcoord.domain.paths.charsets import DOT, DOT_ONLY, SEGMENT_CHARS, CharSet
from eventcoord.domain.paths.syntax import Globstar, Star, analyse, token_chars

Nfa = tuple[list[list[tuple[CharSet, int]]], list[list[int]], list[bool]]


def _compile(pattern: str) -> Nfa:
    segments = analyse(pattern)[1].segments
    chars: list[list[tuple[CharSet, int]]] = []
    seps: list[list[int]] = []
    eps: list[list[int]] = []

    def new() -> int:
        chars.append([])
        seps.append([])
        eps.append([])
        return len(chars) - 1

    q = new()
    accepting: set[int] = set()
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if isinstance(segment, Globstar) and index == last:
            chars[q].append((SEGMENT_CHARS, q))
            seps[q].append(q)
            accepting.add(q)
            break
        if isinstance(segment, Globstar):
            g, nxt = new(), new()
            eps[q].append(nxt)
            chars[q].append((SEGMENT_CHARS, g))
            chars[g].append((SEGMENT_CHARS, g))
            seps[g].append(q)
            q = nxt
            continue
        for token in segment:
            if isinstance(token, Star):
                chars[q].append((SEGMENT_CHARS, q))
                nxt = new()
                eps[q].append(nxt)
            else:
                nxt = new()
                chars[q].append((token_chars(token), nxt))
            q = nxt
        if index == last:
            accepting.add(q)
        else:
            nxt = new()
            seps[q].append(nxt)
            q = nxt
    closures = []
    for state in range(len(chars)):
        seen, stack = [state], [state]
        while stack:
            for t in eps[stack.pop()]:
                if t not in seen:
                    seen.append(t)
                    stack.append(t)
        closures.append(seen)
    return (
        [[e for r in c for e in chars[r]] for c in closures],
        [[t for r in c for t in seps[r]] for c in closures],
        [any(r in accepting for r in c) for c in closures],
    )


# Path validity: inside a segment, nothing read yet / "." / ".." / a proper name.
_START, _DOT, _DOTDOT, _NAME = 0, 1, 2, 3
_AFTER_DOT = (_DOT, _DOTDOT, _NAME, _NAME)


def reference_overlaps(a: str, b: str) -> bool:
    """Is some valid file path matched by both patterns? (Product search, exact.)"""
    (ca, sa, fa), (cb, sb, fb) = _compile(a), _compile(b)
    start = (0, 0, _START)
    seen = {start}
    stack = [start]
    while stack:
        qa, qb, v = stack.pop()
        if v == _NAME and fa[qa] and fb[qb]:
            return True
        successors = []
        if v == _NAME:
            successors += [(ta, tb, _START) for ta in sa[qa] for tb in sb[qb]]
        for xa, ta in ca[qa]:
            for xb, tb in cb[qb]:
                both = charsets.intersect(xa, xb)
                if charsets.contains(both, DOT):
                    successors.append((ta, tb, _AFTER_DOT[v]))
                if both and both != DOT_ONLY:
                    successors.append((ta, tb, _NAME))
        for node in successors:
            if node not in seen:
                seen.add(node)
                stack.append(node)
    return False
