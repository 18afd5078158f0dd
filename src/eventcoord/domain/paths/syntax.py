"""The pattern language of file claims: normalisation, validation and parsing.

A *pattern* names a set of file paths in git wildmatch style; a *file path* is a sequence
of non-empty ``/``-separated segments with no ``.``/``..`` segment and no control
character. The syntax and the validation reasons: docs/paths.md#matching-rules and
docs/paths.md#paths. Beyond them: ``\\/`` is a dangling escape, a reversed range matches nothing (as in
git), POSIX ``[:name:]`` classes are rejected, and so is what no file could match
(``dotdot`` for a segment that can only spell ``.`` or ``..``, ``bad_class`` for a class no
character satisfies): every valid pattern matches at least one file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import msgspec

from eventcoord.domain.paths import charsets
from eventcoord.domain.paths.charsets import DOT_ONLY, SEGMENT_CHARS, CharSet, Interval
from eventcoord.domain.paths.memo import ByteLru
from eventcoord.sanitize import INVISIBLE

MAX_PATH_CHARS: Final = 1024
#: A pattern (a path with a wildcard) is shorter: the cost of comparing two grows with
#: their lengths, and no glob anyone writes by hand comes near it.
MAX_PATTERN_CHARS: Final = 256
MAX_WILDCARDS: Final = 16

# C0, DEL and C1 controls, and the invisible characters that make text lie about what it
# says (bidirectional controls, zero-width characters). They are never legitimate in a file
# name and some of them (NUL, newline, escape sequences) make paths unsafe to log or to hand
# to other tools.
CONTROL_RE: Final = re.compile(f"[\x00-\x1f\x7f-\x9f{INVISIBLE}]")


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
#: Parsed patterns are kept (``analyse``) for as long as their cache holds them: as objects,
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
#: A segment: its name when it has no wildcard (a string is a sequence of its characters,
#: each a literal token), its tokens, or ``**``.
Segment = str | tuple[Token, ...] | Globstar

_ANY: Final = AnyChar()
_STAR: Final = Star()
GLOBSTAR: Final = Globstar()


class Pattern(msgspec.Struct, frozen=True, gc=False):
    """A parsed, validated pattern.

    Never tracked by the cyclic collector (``gc=False``): it holds strings, tuples and
    the token singletons, so it can be in no cycle, and ``analyse`` keeps thousands.
    """

    # The implicit "**" of a trailing "/" is already appended here.
    segments: tuple[Segment, ...]
    # Decoded text when the pattern is a plain file path (no wildcard, no trailing "/").
    literal: str | None
    # Decoded "d/" when the pattern is a directory claim on a plain directory path.
    literal_dir: str | None
    # See literal_prefix().
    prefix: str
    # The literal text every match starts with (up to the first wildcard, "/" included
    # between segments), and the one every match ends with (after the last wildcard).
    head: str = ""
    tail: str = ""


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


#: The characters with a meaning in a segment; every other one stands for itself.
_SPECIAL: Final = re.compile(r"[\\*?\[]")
#: A run of escaped characters (each "\x" is the character x).
_ESCAPED: Final = re.compile(r"(?:\\.)+", re.DOTALL)
_STARS: Final = re.compile(r"\*+")


def _parse_segment(seg: str) -> tuple[Segment, int]:
    """Parse one non-empty raw segment; return it and its wildcard count.

    Runs of literal characters are copied whole (the regular expressions run in C): a
    1,024-character path is parsed in a few microseconds, not one Python step per character.
    """
    if seg == "**":
        return GLOBSTAR, 1
    if _SPECIAL.search(seg) is None:
        if seg == "..":
            raise PathError("dotdot", "'..' segments are not allowed")
        return seg, 0
    tokens: list[Token] = []
    wildcards = 0
    i = 0
    n = len(seg)
    while i < n:
        special = _SPECIAL.search(seg, i)
        if special is None:
            tokens.extend(seg[i:])
            break
        j = special.start()
        tokens.extend(seg[i:j])
        c = seg[j]
        if c == "\\":
            escaped = _ESCAPED.match(seg, j)
            if escaped is None:
                # Also catches "\/": "/" always separates, so there is nothing to escape.
                raise PathError("trailing_escape", f"'\\' must be followed by a character in {seg!r}")
            tokens.extend(escaped.group()[1::2])
            i = escaped.end()
        elif c == "*":
            # A run of stars is one wildcard: "***" means exactly what "*" means.
            tokens.append(_STAR)
            wildcards += 1
            i = _STARS.match(seg, j).end()  # type: ignore[union-attr]
        elif c == "?":
            tokens.append(_ANY)
            wildcards += 1
            i = j + 1
        else:
            cls, i = _parse_class(seg, j)
            tokens.append(cls)
            wildcards += 1
        if wildcards > MAX_WILDCARDS:
            break  # refused by the caller; no need to read the rest
    # A segment that can only ever spell "." or ".." ("\.", "[.][.]", ...) is a
    # relative-directory reference in disguise: no file path can match it.
    if (
        len(tokens) <= 2
        and not any(isinstance(t, Star) for t in tokens)
        and all(token_chars(t) == DOT_ONLY for t in tokens)
    ):
        raise PathError("dotdot", f"segment {seg!r} can only match '.' or '..'")
    if not wildcards:
        return "".join(tokens), 0  # type: ignore[arg-type]
    return tuple(tokens), wildcards


def _decoded(segment: Segment) -> str | None:
    """The literal text of a segment without wildcards, else None."""
    return segment if isinstance(segment, str) else None


#: What parsed patterns kept between calls may hold, in bytes.
ANALYSED_BYTES: Final = 16 * 1024 * 1024


def _analysed_size(raw: str, value: tuple[str, Pattern]) -> int:
    # Measured with tracemalloc (tests/unit/test_paths_bounded.py): the key, the normalised
    # text, a pointer per token and a tuple per segment; literal characters are shared.
    norm, pattern = value
    tokens = sum(len(s) for s in pattern.segments if not isinstance(s, Globstar))
    texts = (pattern.literal or pattern.literal_dir or "", pattern.prefix)
    return (
        300
        + len(raw.encode())
        + len(norm.encode())
        + sum(len(t.encode()) for t in texts)
        + 8 * tokens
        + 64 * len(pattern.segments)
    )


_ANALYSED: ByteLru[str, tuple[str, Pattern]] = ByteLru(ANALYSED_BYTES, _analysed_size)


def analyse(raw: str) -> tuple[str, Pattern]:
    """Normalise, validate and parse ``raw``; kept (bounded in bytes) because claims are re-checked often."""
    known = _ANALYSED.get(raw)
    if known is not None:
        return known
    return _ANALYSED.put(raw, _analyse(raw))


def _analyse(raw: str) -> tuple[str, Pattern]:
    if len(raw) > MAX_PATH_CHARS:
        raise PathError("too_long", f"longer than {MAX_PATH_CHARS} characters")
    if CONTROL_RE.search(raw):
        raise PathError(
            "control_char", "control characters and invisible ones (bidirectional, zero-width) are not allowed"
        )
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
    if _SPECIAL.search(raw) is None:  # a plain path: its segments are its names
        if ".." in kept:
            raise PathError("dotdot", "'..' segments are not allowed")
        segments = list(kept)
    for part in kept if not segments else ():
        segment, count = _parse_segment(part)
        segments.append(segment)
        wildcards += count
        if wildcards > MAX_WILDCARDS:
            break
    if wildcards > MAX_WILDCARDS:
        raise PathError("too_many_wildcards", f"more than {MAX_WILDCARDS} wildcards")
    if wildcards and len(raw) > MAX_PATTERN_CHARS:
        raise PathError(
            "too_long",
            f"a pattern with wildcards is longer than {MAX_PATTERN_CHARS} characters (a plain path may have "
            f"{MAX_PATH_CHARS})",
        )

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
    pattern = Pattern(tuple(segments), literal, literal_dir, "".join(prefix_parts), _head(segments), _tail(segments))
    return "/".join(kept) + ("/" if is_dir else ""), pattern


def _run(tokens: Segment, step: int) -> str:
    """The literal characters at the start (``step`` 1) or the end (-1) of a segment's tokens."""
    out: list[str] = []
    for token in tokens[::step]:  # type: ignore[index]
        if not isinstance(token, str):
            break
        out.append(token)
    return "".join(out[::step])


def _head(segments: list[Segment]) -> str:
    out: list[str] = []
    for index, segment in enumerate(segments):
        if isinstance(segment, str):
            out.append(segment if index == len(segments) - 1 else segment + "/")
            continue
        if isinstance(segment, tuple):
            out.append(_run(segment, 1))
        break  # a "**" may stand for no segment at all: nothing more is sure
    return "".join(out)


def _tail(segments: list[Segment]) -> str:
    out: list[str] = []
    for index in range(len(segments) - 1, -1, -1):
        segment = segments[index]
        if isinstance(segment, str):
            out.append(segment if index == 0 else "/" + segment)
            continue
        if isinstance(segment, tuple):
            out.append(_run(segment, -1))
        elif out:
            out[-1] = out[-1][1:]  # after a "**" that stands for nothing, no "/" before it
        break
    return "".join(reversed(out))


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
