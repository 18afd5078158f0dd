"""Exact overlap of two patterns: is there a valid file path both match?

Each pattern compiles to an epsilon-free NFA over characters plus a separator symbol;
two patterns overlap when the product of their automata, run together with a track of
path validity, accepts some word. Plain files and directories take string fast paths.
The 1,024-character limit on file paths is ignored: patterns whose only common matches
are longer than that (possible only near the limit) are still reported as overlapping,
the conservative answer for conflict detection.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Final

from eventcoord.domain.paths import charsets
from eventcoord.domain.paths.charsets import DOT, DOT_ONLY, SEGMENT_CHARS, CharSet
from eventcoord.domain.paths.syntax import Globstar, Star, analyse, token_chars


@dataclass(frozen=True, slots=True)
class _Nfa:
    """Epsilon-free NFA over characters plus a distinct separator symbol; start is 0."""

    chars: tuple[tuple[tuple[CharSet, int], ...], ...]
    seps: tuple[tuple[int, ...], ...]
    accepting: tuple[bool, ...]
    # (state, code point) -> successor states, filled lazily by _accepts: file names
    # reuse few characters, so most steps become one dict lookup.
    steps: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict, compare=False)


class _NfaBuilder:
    def __init__(self) -> None:
        self.chars: list[list[tuple[CharSet, int]]] = []
        self.seps: list[list[int]] = []
        self.eps: list[list[int]] = []

    def new(self) -> int:
        self.chars.append([])
        self.seps.append([])
        self.eps.append([])
        return len(self.chars) - 1


@functools.lru_cache(maxsize=8192)
def _compile(pattern: str) -> _Nfa:
    """Build the NFA of a pattern (cached: live claims are compared again and again)."""
    segments = analyse(pattern)[1].segments
    b = _NfaBuilder()
    q = b.new()
    accepting: set[int] = set()
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if isinstance(segment, Globstar) and index == last:
            # Final "**": anything at all. The path-validity track of the product
            # rejects the empty remainder (the word would end in "/" or be empty),
            # which is exactly the "at least one segment" rule.
            b.chars[q].append((SEGMENT_CHARS, q))
            b.seps[q].append(q)
            accepting.add(q)
            break
        if isinstance(segment, Globstar):
            # Inner "**/": zero segments (epsilon), or whole segments each ending in
            # "/". The separate state g stops "a/**/b" from accepting "a/xb".
            g = b.new()
            nxt = b.new()
            b.eps[q].append(nxt)
            b.chars[q].append((SEGMENT_CHARS, g))
            b.chars[g].append((SEGMENT_CHARS, g))
            b.seps[g].append(q)
            q = nxt
            continue  # the separator after an inner "**" is part of it
        for token in segment:
            if isinstance(token, Star):
                b.chars[q].append((SEGMENT_CHARS, q))
                nxt = b.new()
                b.eps[q].append(nxt)
            else:
                nxt = b.new()
                b.chars[q].append((token_chars(token), nxt))
            q = nxt
        if index == last:
            accepting.add(q)
        else:
            nxt = b.new()
            b.seps[q].append(nxt)
            q = nxt

    # Epsilon elimination: each state inherits the edges and acceptance of its closure.
    size = len(b.chars)
    closures: list[list[int]] = []
    for state in range(size):
        seen = [state]
        stack = [state]
        while stack:
            for t in b.eps[stack.pop()]:
                if t not in seen:
                    seen.append(t)
                    stack.append(t)
        closures.append(seen)
    return _Nfa(
        chars=tuple(tuple(dict.fromkeys(e for r in closures[s] for e in b.chars[r])) for s in range(size)),
        seps=tuple(tuple(dict.fromkeys(t for r in closures[s] for t in b.seps[r])) for s in range(size)),
        accepting=tuple(any(r in accepting for r in closures[s]) for s in range(size)),
    )


# Path-validity track of the product automaton: where we are inside the current
# segment. Only _V_NAME may be followed by "/" or end the path, which rules out empty
# segments, leading/trailing "/", and "." / ".." segments.
_V_START: Final = 0  # nothing read in this segment yet
_V_DOT: Final = 1  # read "."
_V_DOTDOT: Final = 2  # read ".."
_V_NAME: Final = 3  # read a proper segment name
_AFTER_DOT: Final = (_V_DOT, _V_DOTDOT, _V_NAME, _V_NAME)


@functools.lru_cache(maxsize=4096)
def _joint_step(a: CharSet, b: CharSet) -> tuple[bool, bool]:
    """(can both read '.', can both read some character other than '.')."""
    both = charsets.intersect(a, b)
    return charsets.contains(both, DOT), bool(both) and both != DOT_ONLY


def _intersect_nonempty(a: _Nfa, b: _Nfa) -> bool:
    """Is some valid file path accepted by both automata? Depth-first product search."""
    start = (0, 0, _V_START)
    seen = {start}
    stack = [start]
    while stack:
        qa, qb, v = stack.pop()
        if v == _V_NAME and a.accepting[qa] and b.accepting[qb]:
            return True
        successors: list[tuple[int, int, int]] = []
        if v == _V_NAME:
            successors.extend((ta, tb, _V_START) for ta in a.seps[qa] for tb in b.seps[qb])
        for sa, ta in a.chars[qa]:
            for sb, tb in b.chars[qb]:
                dot, other = _joint_step(sa, sb)
                # The alphabet is effectively split into "." and "anything else":
                # those are the only characters the validity track tells apart, and
                # which concrete character is read otherwise does not matter.
                if dot:
                    successors.append((ta, tb, _AFTER_DOT[v]))
                if other:
                    successors.append((ta, tb, _V_NAME))
        for node in successors:
            if node not in seen:
                seen.add(node)
                stack.append(node)
    return False


def _accepts(nfa: _Nfa, path: str) -> bool:
    """Does the NFA accept this (valid) file path? Plain subset simulation."""
    steps = nfa.steps
    current = {0}
    for ch in path:
        if ch == "/":
            current = {t for q in current for t in nfa.seps[q]}
        else:
            code = ord(ch)
            nxt: set[int] = set()
            for q in current:
                key = (q, code)
                targets = steps.get(key)
                if targets is None:
                    targets = tuple(t for cs, t in nfa.chars[q] if charsets.contains(cs, code))
                    steps[key] = targets
                nxt.update(targets)
            current = nxt
        if not current:
            return False
    return any(nfa.accepting[q] for q in current)


def overlaps(a: str, b: str) -> bool:
    """Return True exactly when some valid file path matches both patterns.

    Both patterns are normalised first (:class:`PathError` if invalid). Plain files and
    plain directory claims are compared as strings; otherwise a literal-prefix check
    filters out most pairs before an exact product-automaton search.
    """
    norm_a, pa = analyse(a)
    norm_b, pb = analyse(b)
    # Fast paths: no automaton needed when neither side has a wildcard.
    if pa.literal is not None:
        if pb.literal is not None:
            return pa.literal == pb.literal
        if pb.literal_dir is not None:
            return pa.literal.startswith(pb.literal_dir)
    elif pa.literal_dir is not None:
        if pb.literal is not None:
            return pb.literal.startswith(pa.literal_dir)
        if pb.literal_dir is not None:
            return pa.literal_dir.startswith(pb.literal_dir) or pb.literal_dir.startswith(pa.literal_dir)
    # Every match of a pattern starts with its literal prefix, so a common match needs
    # one prefix to extend the other.
    if not (pa.prefix.startswith(pb.prefix) or pb.prefix.startswith(pa.prefix)):
        return False
    # A plain file against a pattern (the common claim_files case): running the
    # pattern's automaton over the file is cheaper than the general product search.
    # The file is already a valid path, so no validity tracking is needed.
    if pa.literal is not None:
        return _accepts(_compile(norm_b), pa.literal)
    if pb.literal is not None:
        return _accepts(_compile(norm_a), pb.literal)
    return _intersect_nonempty(_compile(norm_a), _compile(norm_b))
