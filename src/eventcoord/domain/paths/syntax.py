"""The pattern language of file claims: normalisation, validation and parsing.

A *pattern* names a set of file paths in git wildmatch style; a *file path* is a sequence
of non-empty ``/``-separated segments with no ``.``/``..`` segment and no control
character.

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
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final

import msgspec

from eventcoord.domain.paths import charsets
from eventcoord.domain.paths.charsets import DOT_ONLY, SEGMENT_CHARS, CharSet, Interval

MAX_PATH_CHARS: Final = 1024
MAX_WILDCARDS: Final = 16

# C0, DEL and C1 controls. They are never legitimate in a file name and some of them
# (NUL, newline, escape sequences) make paths unsafe to log or to hand to other tools.
CONTROL_RE: Final = re.compile("[\x00-\x1f\x7f-\x9f]")


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


#: One literal character: the one-character string itself, with no object of its own.
#: Parsed patterns are cached (``analyse``) and live as long as the process: as objects,
#: their characters were some 70,000 that every full pass of the cyclic collector walked
#: (75 ms pauses under a claim_files load); a tuple of strings is not even tracked.
Lit = str


@dataclass(frozen=True, slots=True)
class AnyChar:
    """``?``: one character."""


@dataclass(frozen=True, slots=True)
class Star:
    """``*``: any run of characters within a segment."""


@dataclass(frozen=True, slots=True)
class CharClass:
    """``[...]``: one character of a set."""

    # Already resolved: negation applied and restricted to SEGMENT_CHARS, so
    # membership is a plain lookup for both the matcher and the automaton.
    chars: CharSet


@dataclass(frozen=True, slots=True)
class Globstar:
    """``**`` as a whole segment: any number of whole segments."""


Token = Lit | AnyChar | Star | CharClass
Segment = tuple[Token, ...] | Globstar

_ANY: Final = AnyChar()
_STAR: Final = Star()
GLOBSTAR: Final = Globstar()


class Pattern(msgspec.Struct, frozen=True, gc=False):
    """A parsed, validated pattern.

    Never tracked by the cyclic collector (``gc=False``): it holds strings, tuples and
    the token singletons, so it can be in no cycle, and ``analyse`` keeps 8,192 of them.
    """

    # The implicit "**" of a trailing "/" is already appended here.
    segments: tuple[Segment, ...]
    # Decoded text when the pattern is a plain file path (no wildcard, no trailing "/").
    literal: str | None
    # Decoded "d/" when the pattern is a directory claim on a plain directory path.
    literal_dir: str | None
    # See literal_prefix().
    prefix: str


def token_chars(token: Token) -> CharSet:
    """The characters a token can match (a wildcard: any character of a segment)."""
    if isinstance(token, Lit):
        return ((ord(token), ord(token)),)
    if isinstance(token, CharClass):
        return token.chars
    return SEGMENT_CHARS


def _parse_class(seg: str, start: int) -> tuple[CharClass, int]:
    """Parse the class opening at ``seg[start] == '['``; return it and the index after ``]``."""
    n = len(seg)
    i = start + 1
    negated = i < n and seg[i] in "!^"
    if negated:
        i += 1
    ranges: list[Interval] = []
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
    chars = charsets.canonical(ranges)
    if negated:
        chars = charsets.complement(chars)
    chars = charsets.intersect(chars, SEGMENT_CHARS)
    if not chars:
        # A class that no path character can satisfy makes the whole pattern match
        # nothing, which is always a mistake and would break "a claim overlaps itself".
        raise PathError("bad_class", f"character class matches no character in {seg!r}")
    return CharClass(chars), i


def _parse_segment(seg: str) -> tuple[Segment, int]:
    """Parse one non-empty raw segment; return it and its wildcard count."""
    if seg == "**":
        return GLOBSTAR, 1
    if seg == "..":
        raise PathError("dotdot", "'..' segments are not allowed")
    tokens: list[Token] = []
    wildcards = 0
    i = 0
    n = len(seg)
    while i < n:
        c = seg[i]
        if c == "\\":
            if i + 1 == n:
                # Also catches "\/": "/" always separates, so there is nothing to escape.
                raise PathError("trailing_escape", f"'\\' must be followed by a character in {seg!r}")
            tokens.append(seg[i + 1])
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
            tokens.append(c)
            i += 1
    # A segment that can only ever spell "." or ".." ("\.", "[.][.]", ...) is a
    # relative-directory reference in disguise: no file path can match it.
    if (
        len(tokens) <= 2
        and not any(isinstance(t, Star) for t in tokens)
        and all(token_chars(t) == DOT_ONLY for t in tokens)
    ):
        raise PathError("dotdot", f"segment {seg!r} can only match '.' or '..'")
    return tuple(tokens), wildcards


def _decoded(segment: Segment) -> str | None:
    """The literal text of a segment made only of literal characters, else None."""
    if isinstance(segment, Globstar):
        return None
    out: list[str] = []
    for token in segment:
        if not isinstance(token, Lit):
            return None
        out.append(token)
    return "".join(out)


@functools.lru_cache(maxsize=8192)
def analyse(raw: str) -> tuple[str, Pattern]:
    """Normalise, validate and parse ``raw``; cached because claims are re-checked often."""
    if len(raw) > MAX_PATH_CHARS:
        raise PathError("too_long", f"longer than {MAX_PATH_CHARS} characters")
    if CONTROL_RE.search(raw):
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

    segments: list[Segment] = []
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
        segments.append(GLOBSTAR)
        decoded.append(None)
    prefix_parts: list[str] = []
    for index, text in enumerate(decoded):
        if text is None:
            break
        # A literal segment followed by anything else is a whole directory name.
        prefix_parts.append(text if index == len(decoded) - 1 else text + "/")
    pattern = Pattern(tuple(segments), literal, literal_dir, "".join(prefix_parts))
    return "/".join(kept) + ("/" if is_dir else ""), pattern


def normalise_path(raw: str) -> str:
    """Normalise then validate a path or pattern; raise :class:`PathError` if invalid.

    Repeated ``/`` collapse to one and ``.`` segments are dropped; a trailing ``/`` is
    kept (it makes the pattern a directory claim), and a trailing ``.`` segment turns
    into one (``a/.`` becomes ``a/``). Nothing else is rewritten; in particular ``\\``
    is the escape character, not a separator.
    """
    return analyse(raw)[0]


def literal_prefix(pattern: str) -> str:
    """Return the decoded text of the leading whole literal segments of ``pattern``.

    ``src/a/*.py`` gives ``src/a/``, ``*.py`` gives ``''``, a plain file gives the
    whole path and ``src/`` gives ``src/``. Escapes are decoded (``\\*/x*`` gives
    ``*/``), so the result is a plain string every matching file path starts with:
    two patterns can only overlap if one prefix is a prefix of the other.
    """
    return analyse(pattern)[1].prefix
