"""Exact overlap of two patterns, at a cost bounded by their sizes: is there a valid file path both match?

A pattern is a glob over segments (``**`` is its star) whose segments are globs over
characters (``*`` is theirs), and a plain path or name is a glob without a star: the rules
of ``globs`` decide every pair at both levels, none of them ever searching pairs of
positions, and every step is charged to a :class:`Work`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from eventcoord.domain.paths import charsets, globs
from eventcoord.domain.paths.charsets import DOT_ONLY, SEGMENT_CHARS, CharSet
from eventcoord.domain.paths.globs import Piece, Work, WorkExceeded
from eventcoord.domain.paths.memo import ByteLru
from eventcoord.domain.paths.syntax import GLOBSTAR, Pattern, Segment, Star, analyse, token_chars

__all__ = ["DECISION_STEPS", "Work", "WorkExceeded", "overlaps", "overlaps_within"]

#: The steps of overlap checks one decision may take: at most about 35 ms of CPU here
#: (docs/performance.md), whatever the paths. A claim_files past it is refused; the other
#: decisions that check overlaps (a hand-off, a pull's selection, a wait's line and graph)
#: take the careful answer for what is left (``overlaps_within``).
DECISION_STEPS = 100_000

#: What compiled patterns and the answers kept between calls may hold, in bytes.
COMPILED_BYTES: Final = 16 * 1024 * 1024
ANSWERS_BYTES: Final = 4 * 1024 * 1024

#: Steps of the fixed costs (a step is about a quarter of a microsecond here; calibrated
#: by bench/bounded_overlap.py): every pair (analysing both, the fast paths and filters),
#: a pair that needs the glob rules, a segment pattern compared with another or a name.
PAIR_STEPS: Final = 4
RULES_STEPS: Final = 24
SEGMENTS_STEPS: Final = 16
NAME_STEPS: Final = 4
#: Answers that took fewer steps are decided again rather than kept.
ANSWER_WORTH: Final = 40


class _Segment(msgspec.Struct, frozen=True, gc=False):
    """A segment pattern with a wildcard: its pieces of characters between stars (one: no star)."""

    pieces: tuple[Piece, ...]
    #: Its tokens when it has no star (it matches names of exactly that many characters).
    fixed: tuple[Any, ...] | None


#: The segment "*" (any name).
_ANY_SEGMENT: Final = _Segment((globs.piece((), text=True), globs.piece((), text=True)), None)


def _cut(atoms: Sequence[Any], is_star: Any, *, text: bool) -> tuple[Piece, ...]:
    """The pieces of ``atoms`` between the atoms that are stars."""
    bounds = [-1, *(i for i, a in enumerate(atoms) if is_star(a)), len(atoms)]
    return tuple(globs.piece(atoms[bounds[i] + 1 : bounds[i + 1]], text=text) for i in range(len(bounds) - 1))


def _compile_segment(segment: Segment) -> Any:
    if not isinstance(segment, tuple):
        return segment  # a name, or "**"
    pieces = _cut(segment, lambda t: isinstance(t, Star), text=True)
    return _Segment(pieces, segment if len(pieces) == 1 else None)


def _compile(pattern: Pattern) -> tuple[Piece, ...]:
    """The pattern as a glob over segments: its blocks between inner ``**``, each segment a
    name or a :class:`_Segment` (one object for a segment written twice: its checks are shared)."""
    same: dict[Segment, Any] = {}
    atoms: list[Any] = [same.get(s) or same.setdefault(s, _compile_segment(s)) for s in pattern.segments]
    if atoms[-1] is GLOBSTAR:
        # A final "**" needs at least one segment: it is exactly "**/*".
        atoms.append(_ANY_SEGMENT)
    return _cut(atoms, lambda a: a is GLOBSTAR, text=False)


def _compiled_size(key: str, value: tuple[Piece, ...]) -> int:
    # Measured with tracemalloc on long patterns (tests/unit/test_paths_bounded.py).
    atoms = sum(len(b.atoms) for b in value)
    tokens = sum(len(p.atoms) for b in value for s in b.atoms if isinstance(s, _Segment) for p in s.pieces)
    return 600 + 2 * len(key.encode()) + 160 * atoms + 24 * tokens


_COMPILED: ByteLru[str, tuple[Piece, ...]] = ByteLru(COMPILED_BYTES, _compiled_size)
_ANSWERS: ByteLru[tuple[str, str], bool] = ByteLru(ANSWERS_BYTES, lambda k, _: 400 + 4 * (len(k[0]) + len(k[1])))


def _compiled(norm: str, pattern: Pattern, work: Work) -> tuple[Piece, ...]:
    compiled = _COMPILED.get(norm)
    if compiled is None:
        work.charge(20 + len(norm) // 2)
        compiled = _COMPILED.put(norm, _compile(pattern))
    return compiled


def _plain(path: str) -> tuple[Piece, ...]:
    """A plain path as a glob over segments without a star."""
    return (globs.piece(path.split("/"), text=False),)


class _Decider:
    """Decides one pair of patterns: when two atoms can be matched together, at both levels."""

    __slots__ = ("_seen", "work")

    def __init__(self, work: Work) -> None:
        self.work = work
        self._seen: dict[tuple[int, Any], bool] = {}

    def chars_meet(self, x: Any, y: Any) -> bool:
        """Can one character match both tokens?"""
        if isinstance(x, str):
            if isinstance(y, str):
                return x == y
            return charsets.contains(token_chars(y), ord(x))
        if isinstance(y, str):
            return charsets.contains(token_chars(x), ord(y))
        cx, cy = token_chars(x), token_chars(y)
        self.work.charge(1 + (len(cx) + len(cy)) // 8)
        return charsets.meets(cx, cy)

    def segments_meet(self, s: Any, t: Any) -> bool:
        """Can one valid name match both segment patterns (names, or :class:`_Segment`)?"""
        if isinstance(s, str):
            if isinstance(t, str):
                return s == t
            s, t = t, s
        if isinstance(t, str) and s.fixed is not None:
            # A segment without a star against a name (the hot case of a pattern searched
            # among a path's names): the same length, then character by character.
            tokens = s.fixed
            if len(tokens) != len(t):
                return False
            self.work.charge(NAME_STEPS + len(t))
            chars_meet = self.chars_meet
            for token, c in zip(tokens, t, strict=True):
                if token != c and (isinstance(token, str) or not chars_meet(token, c)):
                    return False
            return True
        key = (id(s), t if isinstance(t, str) else id(t))
        known = self._seen.get(key)
        if known is None:
            self.work.charge(SEGMENTS_STEPS)
            if isinstance(t, str):
                known = _name_matches(s, t, self.chars_meet, self.work)
            else:
                known = self._names_meet(s.pieces, t.pieces)
            self._seen[key] = known
        return known

    def _names_meet(self, a: tuple[Piece, ...], b: tuple[Piece, ...]) -> bool:
        met = globs.meet(a, b, self.chars_meet, self.work)
        if not met or (len(a) > 1 and len(b) > 1):
            # Two stars can always take one more character between them: a common name
            # can be made longer than "..", so it is a valid name.
            return met
        fixed = a[0] if len(a) == 1 else b[0]
        if len(fixed.atoms) >= 3:
            return True  # no name of 3 characters or more is "." or ".."
        # A common name of one or two characters must not be all dots.
        if len(a) == 1 and len(b) == 1:
            return _not_only_dots(_common(a[0].atoms, list(b[0].atoms)))
        starred = b if len(a) == 1 else a
        return any(
            _not_only_dots(_common(fixed.atoms, placed)) for placed in globs.placements(starred, len(fixed.atoms))
        )


def _name_matches(segment: _Segment, name: str, chars_meet: globs.Meet, work: Work) -> bool:
    """Does a segment pattern with a star match this (valid) name?"""
    return globs.meet(segment.pieces, (globs.Piece(tuple(name), name),), chars_meet, work)


def _common(fixed: tuple[Any, ...], placed: list[Any]) -> list[CharSet]:
    """The characters each position of a short name may take under both patterns."""
    return [
        charsets.intersect(token_chars(f), SEGMENT_CHARS if p is None else token_chars(p))
        for f, p in zip(fixed, placed, strict=True)
    ]


def _not_only_dots(sets: list[CharSet]) -> bool:
    return all(sets) and any(s != DOT_ONLY for s in sets)


def overlaps_within(a: str, b: str, work: Work) -> bool | None:
    """:func:`overlaps` within ``work``'s limit; None once past it (the pair is undecided,
    and so is every later one: the caller takes its careful answer)."""
    if work.exhausted:
        return None
    try:
        return overlaps(a, b, work)
    except WorkExceeded:
        return None


def overlaps(a: str, b: str, work: Work | None = None) -> bool:
    """Return True exactly when some valid file path matches both patterns.

    Both patterns are normalised first (:class:`PathError` if invalid). Plain files and
    plain directory claims are compared as strings, checks of the literal text every match
    starts and ends with filter out most other pairs, and the rest are decided by the glob
    rules at both levels; every step is charged to ``work`` (:class:`WorkExceeded` once
    past its limit). Costly answers for two patterns are kept (bounded in bytes).

    The 1,024-character limit on file paths is ignored: patterns whose only common
    matches are longer than that are still reported as overlapping, the conservative
    answer for conflict detection.
    """
    work = work if work is not None else Work()
    work.charge(PAIR_STEPS)
    norm_a, pa = analyse(a)
    norm_b, pb = analyse(b)
    # Fast paths: no glob rule needed when neither side has a wildcard.
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
    # Every match of a pattern starts with its head and ends with its tail, so a common
    # match needs one head to extend the other, and one tail the other: most pairs end here.
    head_a, head_b, tail_a, tail_b = pa.head, pb.head, pa.tail, pb.tail
    if not (head_a.startswith(head_b) or head_b.startswith(head_a)):
        return False
    if not (tail_a.endswith(tail_b) or tail_b.endswith(tail_a)):
        return False
    if pa.literal is not None or pb.literal is not None:
        # A plain file against a pattern (the common claim_files case): kept answers would
        # cost more than deciding again.
        plain, norm, pattern = (pa.literal, norm_b, pb) if pa.literal is not None else (pb.literal, norm_a, pa)
        assert plain is not None
        work.charge(RULES_STEPS // 2 + plain.count("/"))
        blocks = _compiled(norm, pattern, work)
        return globs.meet(blocks, _plain(plain), _Decider(work).segments_meet, work)
    key = (norm_a, norm_b) if norm_a <= norm_b else (norm_b, norm_a)
    known = _ANSWERS.get(key)
    if known is not None:
        return known
    spent = work.spent
    work.charge(RULES_STEPS)
    blocks_a = _compiled(norm_a, pa, work)
    blocks_b = _compiled(norm_b, pb, work)
    met = globs.meet(blocks_a, blocks_b, _Decider(work).segments_meet, work)
    if work.spent - spent > ANSWER_WORTH:  # an answer cheaper than a look-up is not kept
        _ANSWERS.put(key, met)
    return met


def clear_caches() -> None:
    """Forget compiled patterns and kept answers (tests and benchmarks start cold)."""
    _COMPILED.clear()
    _ANSWERS.clear()
