"""Path patterns for file claims: normalisation, validation, matching and exact overlap.

Pure module (no I/O, stdlib only). A *pattern* names a set of file paths in git
wildmatch style; a *file path* is a sequence of non-empty ``/``-separated segments
with no ``.``/``..`` segment and no control character.

Syntax (case-sensitive):

* ``/`` always separates segments; it cannot be escaped (``\\/`` is rejected as a
  dangling escape) and no wildcard ever matches it.
* ``*`` matches any run (possibly empty) of non-``/`` characters, a leading ``.``
  included; ``?`` matches one non-``/`` character.
* ``[...]`` matches one character: ranges ``a-z``, negation with a leading ``!`` or
  ``^``, a ``]`` right after the opening (and optional negation) is literal, ``\\x``
  inside a class is literal ``x``. A reversed range matches nothing (as in git). POSIX
  ``[:name:]`` classes are not supported and are rejected.
* ``\\x`` matches the character ``x`` literally.
* A segment that is exactly ``**`` matches zero or more whole segments, except as the
  last segment, where it needs at least one (``a/**`` covers what is inside ``a`` but
  not the file ``a``; ``**`` alone matches every file). ``**`` inside a longer segment
  is just ``*``.
* A trailing ``/`` is a directory claim: ``d/`` means ``d/**``.

Validation also rejects segments that can only ever spell ``.`` or ``..`` (``\\.``,
``[.]``) with reason ``dotdot``, and classes no path character can satisfy with
``bad_class``, so every valid pattern matches at least one file. A run of ``*``
counts as one wildcard.

Overlap (:func:`overlaps`) is decided exactly with a product automaton. It ignores the
1,024-character limit on file paths: patterns whose only common matches are longer
than that (possible only near the limit) are still reported as overlapping, which is
the conservative answer for conflict detection.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["PathError", "literal_prefix", "matches", "normalise_path", "overlaps"]

MAX_PATH_CHARS: Final = 1024
MAX_WILDCARDS: Final = 16

# C0, DEL and C1 controls. They are never legitimate in a file name and some of them
# (NUL, newline, escape sequences) make paths unsafe to log or to hand to other tools.
_CONTROL_RE: Final = re.compile("[\x00-\x1f\x7f-\x9f]")

_MAX_CODE_POINT: Final = 0x10FFFF
_DOT: Final = ord(".")

# A character set is a sorted tuple of disjoint, non-adjacent inclusive code point
# intervals. Keeping sets canonical makes them hashable cache keys and lets equality
# mean set equality.
_Interval = tuple[int, int]
_CharSet = tuple[_Interval, ...]

# Every character that may appear inside a file path segment: everything except "/"
# and the control characters rejected by normalise_path. Wildcards and classes are
# intersected with this set so that "can match some character" means "can match some
# character of a valid path".
_SEGMENT_CHARS: Final[_CharSet] = ((0x20, 0x2E), (0x30, 0x7E), (0xA0, _MAX_CODE_POINT))
_DOT_ONLY: Final[_CharSet] = ((_DOT, _DOT),)


class PathError(ValueError):
    """Invalid path or pattern.

    ``reason`` is a short machine-readable string: ``empty``, ``absolute``,
    ``dotdot``, ``control_char``, ``too_long``, ``too_many_wildcards``,
    ``bad_class`` or ``trailing_escape``.
    """

    reason: str

    def __init__(self, reason: str, detail: str) -> None:
        """Build the error from its machine reason and a human-readable detail."""
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


# --------------------------------------------------------------------------- char sets


def _cs_canonical(intervals: list[_Interval]) -> _CharSet:
    merged: list[_Interval] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return tuple(merged)


def _cs_complement(cs: _CharSet) -> _CharSet:
    out: list[_Interval] = []
    nxt = 0
    for lo, hi in cs:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAX_CODE_POINT:
        out.append((nxt, _MAX_CODE_POINT))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _cs_intersect(a: _CharSet, b: _CharSet) -> _CharSet:
    # Cached because the product search intersects the same few sets over and over.
    out: list[_Interval] = []
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


def _cs_contains(cs: _CharSet, code: int) -> bool:
    # Hot path of _accepts; intervals are sorted, so stop at the first one above code.
    for lo, hi in cs:
        if code < lo:
            return False
        if code <= hi:
            return True
    return False


# ------------------------------------------------------------------------------ parsing


@dataclass(frozen=True, slots=True)
class _Lit:
    char: str


@dataclass(frozen=True, slots=True)
class _AnyChar:
    pass


@dataclass(frozen=True, slots=True)
class _Star:
    pass


@dataclass(frozen=True, slots=True)
class _Class:
    # Already resolved: negation applied and restricted to _SEGMENT_CHARS, so
    # membership is a plain lookup for both the matcher and the automaton.
    chars: _CharSet


@dataclass(frozen=True, slots=True)
class _Globstar:
    pass


_Token = _Lit | _AnyChar | _Star | _Class
_Segment = tuple[_Token, ...] | _Globstar

_ANY: Final = _AnyChar()
_STAR: Final = _Star()
_GLOBSTAR: Final = _Globstar()


@dataclass(frozen=True, slots=True)
class _Pattern:
    # The implicit "**" of a trailing "/" is already appended here.
    segments: tuple[_Segment, ...]
    # Decoded text when the pattern is a plain file path (no wildcard, no trailing "/").
    literal: str | None
    # Decoded "d/" when the pattern is a directory claim on a plain directory path.
    literal_dir: str | None
    # See literal_prefix().
    prefix: str


def _token_chars(token: _Token) -> _CharSet:
    if isinstance(token, _Lit):
        return ((ord(token.char), ord(token.char)),)
    if isinstance(token, _Class):
        return token.chars
    return _SEGMENT_CHARS


def _parse_class(seg: str, start: int) -> tuple[_Class, int]:
    """Parse the class opening at ``seg[start] == '['``; return it and the index after ``]``."""
    n = len(seg)
    i = start + 1
    negated = i < n and seg[i] in "!^"
    if negated:
        i += 1
    ranges: list[_Interval] = []
    first = True
    while True:
        if i >= n:
            raise PathError("bad_class", f"unterminated '[' in {seg!r}")
        c = seg[i]
        # git semantics: a "]" straight after "[" (or "[!") is a member, not the end.
        if c == "]" and not first:
            i += 1
            break
        first = False
        if c == "\\":
            if i + 1 >= n:
                raise PathError("bad_class", f"unterminated '[' in {seg!r}")
            lo = seg[i + 1]
            i += 2
        elif c == "[" and i + 1 < n and seg[i + 1] == ":":
            # Rejected rather than silently read as members, which would diverge from
            # git, where "[[:alpha:]]" means letters.
            raise PathError("bad_class", f"POSIX character classes are not supported: {seg!r}")
        else:
            lo = c
            i += 1
        hi = lo
        # "-" right before the closing "]" is a literal member ("[a-]").
        if i + 1 < n and seg[i] == "-" and seg[i + 1] != "]":
            if seg[i + 1] == "\\":
                if i + 2 >= n:
                    raise PathError("bad_class", f"unterminated '[' in {seg!r}")
                hi = seg[i + 2]
                i += 3
            else:
                hi = seg[i + 1]
                i += 2
        if ord(lo) <= ord(hi):  # a reversed range contributes nothing, as in git
            ranges.append((ord(lo), ord(hi)))
    chars = _cs_canonical(ranges)
    if negated:
        chars = _cs_complement(chars)
    chars = _cs_intersect(chars, _SEGMENT_CHARS)
    if not chars:
        # A class that no path character can satisfy makes the whole pattern match
        # nothing, which is always a mistake and would break "a claim overlaps itself".
        raise PathError("bad_class", f"character class matches no character in {seg!r}")
    return _Class(chars), i


def _parse_segment(seg: str) -> tuple[_Segment, int]:
    """Parse one non-empty raw segment; return it and its wildcard count."""
    if seg == "**":
        return _GLOBSTAR, 1
    if seg == "..":
        raise PathError("dotdot", "'..' segments are not allowed")
    tokens: list[_Token] = []
    wildcards = 0
    i = 0
    n = len(seg)
    while i < n:
        c = seg[i]
        if c == "\\":
            if i + 1 == n:
                # Also catches "\/": "/" always separates, so there is nothing to escape.
                raise PathError(
                    "trailing_escape", f"'\\' must be followed by a character in {seg!r}"
                )
            tokens.append(_Lit(seg[i + 1]))
            i += 2
        elif c == "*":
            while i < n and seg[i] == "*":
                i += 1
            # A run of stars is one wildcard: "***" means exactly what "*" means.
            tokens.append(_STAR)
            wildcards += 1
        elif c == "?":
            tokens.append(_ANY)
            wildcards += 1
            i += 1
        elif c == "[":
            cls, i = _parse_class(seg, i)
            tokens.append(cls)
            wildcards += 1
        else:
            tokens.append(_Lit(c))
            i += 1
    # A segment that can only ever spell "." or ".." ("\.", "[.][.]", ...) is a
    # relative-directory reference in disguise: no file path can match it.
    if (
        len(tokens) <= 2
        and not any(isinstance(t, _Star) for t in tokens)
        and all(_token_chars(t) == _DOT_ONLY for t in tokens)
    ):
        raise PathError("dotdot", f"segment {seg!r} can only match '.' or '..'")
    return tuple(tokens), wildcards


def _decoded(segment: _Segment) -> str | None:
    """The literal text of a segment made only of literal characters, else None."""
    if isinstance(segment, _Globstar):
        return None
    out: list[str] = []
    for token in segment:
        if not isinstance(token, _Lit):
            return None
        out.append(token.char)
    return "".join(out)


@functools.lru_cache(maxsize=8192)
def _analyse(raw: str) -> tuple[str, _Pattern]:
    """Normalise, validate and parse ``raw``; cached because claims are re-checked often."""
    if len(raw) > MAX_PATH_CHARS:
        raise PathError("too_long", f"longer than {MAX_PATH_CHARS} characters")
    if _CONTROL_RE.search(raw):
        raise PathError("control_char", "control characters are not allowed")
    if not raw:
        raise PathError("empty", "path is empty")
    if raw.startswith("/"):
        raise PathError("absolute", "path must be relative")
    parts = raw.split("/")
    # A trailing "." names the directory itself, so "a/." is the directory claim "a/".
    is_dir = parts[-1] in ("", ".")
    kept = [p for p in parts if p not in ("", ".")]
    if not kept:
        raise PathError("empty", "path is empty after normalisation")

    segments: list[_Segment] = []
    wildcards = 0
    for part in kept:
        segment, count = _parse_segment(part)
        segments.append(segment)
        wildcards += count
    if wildcards > MAX_WILDCARDS:
        raise PathError("too_many_wildcards", f"more than {MAX_WILDCARDS} wildcards")

    decoded = [_decoded(s) for s in segments]
    literal: str | None = None
    literal_dir: str | None = None
    plain = [d for d in decoded if d is not None]
    if len(plain) == len(decoded):
        if is_dir:
            literal_dir = "/".join(plain) + "/"
        else:
            literal = "/".join(plain)

    if is_dir:
        segments.append(_GLOBSTAR)
        decoded.append(None)
    prefix_parts: list[str] = []
    for index, text in enumerate(decoded):
        if text is None:
            break
        # A literal segment followed by anything else is a whole directory name.
        prefix_parts.append(text if index == len(decoded) - 1 else text + "/")
    pattern = _Pattern(tuple(segments), literal, literal_dir, "".join(prefix_parts))
    return "/".join(kept) + ("/" if is_dir else ""), pattern


def normalise_path(raw: str) -> str:
    """Normalise then validate a path or pattern; raise :class:`PathError` if invalid.

    Repeated ``/`` collapse to one and ``.`` segments are dropped; a trailing ``/`` is
    kept (it makes the pattern a directory claim), and a trailing ``.`` segment turns
    into one (``a/.`` becomes ``a/``). Nothing else is rewritten; in particular ``\\``
    is the escape character, not a separator.
    """
    return _analyse(raw)[0]


def literal_prefix(pattern: str) -> str:
    """Return the decoded text of the leading whole literal segments of ``pattern``.

    ``src/a/*.py`` gives ``src/a/``, ``*.py`` gives ``''``, a plain file gives the
    whole path and ``src/`` gives ``src/``. Escapes are decoded (``\\*/x*`` gives
    ``*/``), so the result is a plain string every matching file path starts with:
    two patterns can only overlap if one prefix is a prefix of the other.
    """
    return _analyse(pattern)[1].prefix


# ------------------------------------------------------------------- reference matching


def _is_file_path(path: str) -> bool:
    if not path or _CONTROL_RE.search(path):
        return False
    return all(name not in ("", ".", "..") for name in path.split("/"))


def _segment_matches(tokens: tuple[_Token, ...], name: str) -> bool:
    # Classic single-star backtracking: on a mismatch, let the most recent "*" absorb
    # one more character. Correct for "*" plus single-character tokens and O(n*m) at
    # worst, so hostile patterns like "*a*a*a*...b" cannot blow up the way a
    # backtracking regex would.
    ti = ni = 0
    star_ti = -1
    star_ni = 0
    while ni < len(name):
        token = tokens[ti] if ti < len(tokens) else None
        if isinstance(token, _Star):
            star_ti = ti
            star_ni = ni
            ti += 1
        elif token is not None and (
            isinstance(token, _AnyChar)
            or (isinstance(token, _Lit) and token.char == name[ni])
            or (isinstance(token, _Class) and _cs_contains(token.chars, ord(name[ni])))
        ):
            ti += 1
            ni += 1
        elif star_ti >= 0:
            ti = star_ti + 1
            star_ni += 1
            ni = star_ni
        else:
            return False
    return all(isinstance(t, _Star) for t in tokens[ti:])


def matches(pattern: str, path: str) -> bool:
    """Return True when the concrete file path ``path`` matches ``pattern``.

    ``pattern`` is normalised first (:class:`PathError` if invalid). ``path`` is taken
    literally (no escapes) and must be a normalised file path; anything else (empty or
    ``.``/``..`` segments, leading or trailing ``/``, control characters) matches
    nothing. This is the reference semantics, written independently of the automaton
    behind :func:`overlaps`.
    """
    segments = _analyse(pattern)[1].segments
    if not _is_file_path(path):
        return False
    names = path.split("/")
    # Set of indices into ``names`` where the next pattern segment may start.
    positions = {0}
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if isinstance(segment, _Globstar):
            if index == last:
                # A final "**" swallows the rest but needs at least one segment.
                return min(positions) < len(names)
            positions = set(range(min(positions), len(names) + 1))
        else:
            positions = {
                j + 1 for j in positions if j < len(names) and _segment_matches(segment, names[j])
            }
        if not positions:
            return False
    return len(names) in positions


# ------------------------------------------------------------------------------ overlap


@dataclass(frozen=True, slots=True)
class _Nfa:
    """Epsilon-free NFA over characters plus a distinct separator symbol; start is 0."""

    chars: tuple[tuple[tuple[_CharSet, int], ...], ...]
    seps: tuple[tuple[int, ...], ...]
    accepting: tuple[bool, ...]
    # (state, code point) -> successor states, filled lazily by _accepts: file names
    # reuse few characters, so most steps become one dict lookup.
    steps: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict, compare=False)


class _NfaBuilder:
    def __init__(self) -> None:
        self.chars: list[list[tuple[_CharSet, int]]] = []
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
    segments = _analyse(pattern)[1].segments
    b = _NfaBuilder()
    q = b.new()
    accepting: set[int] = set()
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if isinstance(segment, _Globstar) and index == last:
            # Final "**": anything at all. The path-validity track of the product
            # rejects the empty remainder (the word would end in "/" or be empty),
            # which is exactly the "at least one segment" rule.
            b.chars[q].append((_SEGMENT_CHARS, q))
            b.seps[q].append(q)
            accepting.add(q)
            break
        if isinstance(segment, _Globstar):
            # Inner "**/": zero segments (epsilon), or whole segments each ending in
            # "/". The separate state g stops "a/**/b" from accepting "a/xb".
            g = b.new()
            nxt = b.new()
            b.eps[q].append(nxt)
            b.chars[q].append((_SEGMENT_CHARS, g))
            b.chars[g].append((_SEGMENT_CHARS, g))
            b.seps[g].append(q)
            q = nxt
            continue  # the separator after an inner "**" is part of it
        for token in segment:
            if isinstance(token, _Star):
                b.chars[q].append((_SEGMENT_CHARS, q))
                nxt = b.new()
                b.eps[q].append(nxt)
            else:
                nxt = b.new()
                b.chars[q].append((_token_chars(token), nxt))
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
        chars=tuple(
            tuple(dict.fromkeys(e for r in closures[s] for e in b.chars[r])) for s in range(size)
        ),
        seps=tuple(
            tuple(dict.fromkeys(t for r in closures[s] for t in b.seps[r])) for s in range(size)
        ),
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
def _joint_step(a: _CharSet, b: _CharSet) -> tuple[bool, bool]:
    """(can both read '.', can both read some character other than '.')."""
    both = _cs_intersect(a, b)
    return _cs_contains(both, _DOT), bool(both) and both != _DOT_ONLY


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
                    targets = tuple(t for cs, t in nfa.chars[q] if _cs_contains(cs, code))
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
    norm_a, pa = _analyse(a)
    norm_b, pb = _analyse(b)
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
            return pa.literal_dir.startswith(pb.literal_dir) or pb.literal_dir.startswith(
                pa.literal_dir
            )
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
