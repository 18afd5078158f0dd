"""Do two globs share a word? Exact, in steps linear in their sizes, each step counted.

A glob here is a sequence of *pieces* separated by stars (a star matches any run of
atoms); a piece is a run of atoms, each matching one atom of the word. Atoms are the
characters of a segment or the segments of a path: a literal atom is a string (a
character, a name), any other a wildcard, and ``overlap`` supplies when two atoms can be
matched by one. Three rules decide (:func:`meet`), because atoms are chosen independently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec

Meet = Callable[[Any, Any], bool]


class WorkExceeded(Exception):
    """Deciding would take more steps than the :class:`Work` allows."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} steps")
        self.limit = limit


class Work:
    """Steps spent deciding overlaps, against an optional limit.

    A step is one atom compared, one position of a search, one kept answer read: each
    costs a bounded time, so a limit on steps is a limit on time that does not depend on
    the machine's load.
    """

    __slots__ = ("limit", "spent")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.spent = 0

    @property
    def exhausted(self) -> bool:
        """Whether the limit has been passed (every later charge fails at once)."""
        return self.limit is not None and self.spent > self.limit

    def charge(self, steps: int) -> None:
        """Spend ``steps``; :class:`WorkExceeded` once past the limit (before doing them)."""
        self.spent += steps
        if self.limit is not None and self.spent > self.limit:
            raise WorkExceeded(self.limit)


class Piece(msgspec.Struct, frozen=True, gc=False):
    """A run of atoms between two stars. Never tracked by the cyclic collector (it holds
    tuples and strings, so it can be in no cycle)."""

    atoms: tuple[Any, ...]
    #: The atoms spelt out, when they are all literal characters (fast string compares).
    text: str | None


def piece(atoms: Sequence[Any], *, text: bool) -> Piece:
    """Build a piece; ``text``: its atoms are characters (spelt out when all are literal)."""
    spelt = "".join(atoms) if text and all(isinstance(a, str) for a in atoms) else None
    return Piece(tuple(atoms), spelt)


def meet(a: Sequence[Piece], b: Sequence[Piece], atoms_meet: Meet, work: Work) -> bool:
    """Is some word matched by both globs (each a sequence of pieces; more than one: a star)?

    * Both globs have a star: they meet exactly when their first pieces agree on their
      common length and so do their last pieces, aligned at the end. (The word: the longer
      first piece, the middle pieces of one glob, those of the other, the longer last piece;
      each star swallows what the other glob put there.)
    * One has a star, the other none: the word has the fixed length of the one without; the
      first and last pieces must agree at its ends, and the middle pieces must fit in order in
      between. Placing each one leftmost is never worse, so a left-to-right search decides
      (Shift-And: a bit per position of the piece, one step per atom of the word).
    * Neither has a star: same length, atom by atom.
    """
    work.charge(3)
    if len(a) > 1 and len(b) > 1:
        return _ends_meet(a[0], b[0], True, atoms_meet, work) and _ends_meet(a[-1], b[-1], False, atoms_meet, work)
    if len(a) == 1 and len(b) == 1:
        return len(a[0].atoms) == len(b[0].atoms) and _agree_at(a[0], b[0], 0, atoms_meet, work)
    starred, word = (a, b[0]) if len(b) == 1 else (b, a[0])
    n = len(word.atoms)
    first, last = starred[0], starred[-1]
    end = n - len(last.atoms)
    if len(first.atoms) > end:
        return False
    if not (_agree_at(first, word, 0, atoms_meet, work) and _agree_at(last, word, end, atoms_meet, work)):
        return False
    at = len(first.atoms)
    for middle in starred[1:-1]:
        found = _find(middle, word, at, end, atoms_meet, work)
        if found < 0:
            return False
        at = found + len(middle.atoms)
    return True


def placements(starred: Sequence[Piece], n: int) -> Iterator[list[Any]]:
    """Every way a glob with a star fits a word of ``n`` atoms: the atom (or None, under a
    star) it puts at each position. Exponential in general: only for tiny ``n``."""
    first, last, middles = starred[0], starred[-1], starred[1:-1]
    end = n - len(last.atoms)
    if len(first.atoms) > end:
        return
    base: list[Any] = [None] * n
    base[: len(first.atoms)] = first.atoms
    base[end:] = last.atoms

    def place(i: int, at: int, word: list[Any]) -> Iterator[list[Any]]:
        if i == len(middles):
            yield word
            return
        size = len(middles[i].atoms)
        for start in range(at, end - size + 1):
            placed = list(word)
            placed[start : start + size] = middles[i].atoms
            yield from place(i + 1, start + size, placed)

    yield from place(0, len(first.atoms), base)


def _ends_meet(p: Piece, q: Piece, head: bool, atoms_meet: Meet, work: Work) -> bool:
    """Do two first pieces (``head``) or two last pieces agree on their common length?"""
    short, long_ = (p, q) if len(p.atoms) <= len(q.atoms) else (q, p)
    at = 0 if head else len(long_.atoms) - len(short.atoms)
    return _agree_at(short, long_, at, atoms_meet, work)


def _agree_at(p: Piece, word: Piece, at: int, atoms_meet: Meet, work: Work) -> bool:
    """Can every atom of ``p`` be matched together with the atom of ``word`` at ``at + i``?"""
    if p.text is not None and word.text is not None:
        work.charge(1)
        return word.text.startswith(p.text, at)
    work.charge(len(p.atoms))
    atoms = word.atoms
    for i, x in enumerate(p.atoms):
        y = atoms[at + i]
        if x is not y and not atoms_meet(x, y):
            return False
    return True


def _find(p: Piece, word: Piece, lo: int, hi: int, atoms_meet: Meet, work: Work) -> int:
    """The leftmost start in ``[lo, hi - len(p)]`` where ``p`` agrees with ``word``, or -1."""
    size = len(p.atoms)
    if hi - lo < size:
        return -1
    if size == 0:
        return lo
    if p.text is not None and word.text is not None:
        work.charge(1)
        return word.text.find(p.text, lo, hi)
    # Shift-And: bit i of ``state`` says p[:i + 1] agrees with the atoms just read.
    work.charge(size)
    by_literal: dict[str, int] = {}
    by_atom: dict[int, tuple[int, Any]] = {}  # a wildcard atom met twice is tried once
    for i, x in enumerate(p.atoms):
        if isinstance(x, str):
            by_literal[x] = by_literal.get(x, 0) | (1 << i)
        else:
            bits, _ = by_atom.get(id(x), (0, x))
            by_atom[id(x)] = (bits | (1 << i), x)
    wild = list(by_atom.values())
    goal = 1 << (size - 1)
    state = 0
    atoms = word.atoms
    per_atom = 1 + 2 * len(wild)
    for j in range(lo, hi):
        y = atoms[j]
        if isinstance(y, str):
            bits = by_literal.get(y, 0)
        else:
            # A wildcard of the word: every literal of p it can be.
            work.charge(len(by_literal))
            bits = 0
            for mask in by_literal.values():
                if atoms_meet(p.atoms[(mask & -mask).bit_length() - 1], y):
                    bits |= mask
        for mask, x in wild:
            if bits & mask != mask and atoms_meet(x, y):
                bits |= mask
        state = ((state << 1) | 1) & bits
        if state & goal:
            work.charge((j + 1 - lo) * per_atom)
            return j - size + 1
    work.charge((hi - lo) * per_atom)
    return -1
