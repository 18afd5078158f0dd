"""Properties of eventcoord.domain.paths, against an exhaustive oracle: overlap is exact.

``overlaps`` (the automaton) is checked against brute force over a universe of paths
proven large enough below, against ``matches`` (the reference) and against a regex
translation; normalisation is idempotent.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from eventcoord.domain.paths import (
    PathError,
    literal_prefix,
    matches,
    normalise_path,
    overlaps,
)

# ------------------------------------------------------------------- property testing
#
# Patterns are built from TOKENS: 1-2 tokens per segment, 1-3 segments, optional
# trailing "/", and at most 3 "effective" segments after normalisation (a trailing "/"
# counts as one, as it stands for a final "**").
#
# The oracle enumerates UNIVERSE: every path of 1-4 segments drawn from SEGMENTS.
# Why that is enough to decide overlap exactly for these patterns:
#
# * Characters. Tokens only distinguish "a", "b", "." and "everything else" (every
#   other character is treated alike by a, b, ., *, ?, [ab] and [!a]). The check in
#   test_segment_universe_is_sufficient uses "c" for "everything else".
# * Segment length. Each segment of a common match f is constrained by at most one
#   segment of each pattern (or by nothing, when a "**" swallows it), each with at most
#   2 tokens. A segment pattern without "*" has a fixed length <= 2. If both have a
#   "*", each has at most one other token, so in a match of length >= 4 some character
#   is consumed by "*" on both sides and can be deleted; the result still has length
#   >= 3, so it cannot become "." or "..". Hence a shortest common segment has length
#   <= 3, over {a, b, c, .}. test_segment_universe_is_sufficient checks exhaustively
#   that SEGMENTS contains a common match for every such pair of segment patterns that
#   has one.
# * Segment count. Align a shortest f with both patterns. A segment of f swallowed by
#   "**" in both patterns can be deleted unless it is the last one and both patterns
#   end in a final "**" (which needs >= 1 segment). So |f| <= R_p + R_q + 1, with R the
#   number of non-"**" segments. A pattern without "**" fixes |f| = R <= 3. Otherwise
#   both have a "**", so R_p, R_q <= 2, and |f| = 5 would need both to end in a final
#   "**" with two plain segments before it ("X/Y/**" and "U/V/**"); but then f's first
#   two segments are plain in both patterns, so |f| <= 3. Hence |f| <= 4.
#
# The naive bounds (segments of length 1-3 over {a, b, c, .}, up to 7 segments) would
# give billions of paths; the argument above keeps UNIVERSE at ~16k.

TOKENS = ["a", "b", ".", "*", "?", "**", "[ab]", "[!a]"]
SEGMENTS = ["a", "b", "aa", "ab", "a.", "ba", "bb", "b.", ".a", ".b", ".b."]
MAX_FILE_SEGMENTS = 4
UNIVERSE_BY_COUNT: dict[int, list[str]] = {
    n: ["/".join(parts) for parts in itertools.product(SEGMENTS, repeat=n)] for n in range(1, MAX_FILE_SEGMENTS + 1)
}
UNIVERSE = [f for files in UNIVERSE_BY_COUNT.values() for f in files]


def _segment_patterns() -> list[str]:
    out = []
    for n in (1, 2):
        for combo in itertools.product(TOKENS, repeat=n):
            raw = "".join(combo)
            try:
                norm = normalise_path(raw)
            except PathError:
                continue
            if "/" not in norm:
                out.append(norm)
    return out


def test_segment_universe_is_sufficient() -> None:
    valid = [
        "".join(chars)
        for n in (1, 2, 3)
        for chars in itertools.product("abc.", repeat=n)
        if "".join(chars) not in (".", "..")
    ]
    patterns = _segment_patterns()
    assert len(patterns) > 40
    full = {p: {s for s in valid if matches(p, s)} for p in patterns}
    reduced = {p: {s for s in SEGMENTS if matches(p, s)} for p in patterns}
    for p, q in itertools.product(patterns, repeat=2):
        assert bool(full[p] & full[q]) == bool(reduced[p] & reduced[q]), (p, q)


def _shape(pattern: str) -> tuple[int, int, bool]:
    """(plain segments, "**" segments incl. a trailing "/", ends with a final "**")."""
    is_dir = pattern.endswith("/")
    parts = (pattern[:-1] if is_dir else pattern).split("/")
    globs = parts.count("**") + is_dir
    return len(parts) + is_dir - globs, globs, is_dir or parts[-1] == "**"


def _file_counts(pattern: str) -> set[int]:
    plain, globs, final_glob = _shape(pattern)
    if not globs:
        return {plain}
    return set(range(plain + final_glob, MAX_FILE_SEGMENTS + 1))


def _build(segments: list[list[str]], trailing_slash: bool) -> str | None:
    """Join token lists into a normalised pattern, or None if invalid or too big."""
    raw = "/".join("".join(tokens) for tokens in segments) + ("/" if trailing_slash else "")
    try:
        norm = normalise_path(raw)
    except PathError:
        return None
    plain, globs, _ = _shape(norm)
    return norm if plain + globs <= 3 else None


# "." and "?" are drawn twice as often: the dot rules (".?" vs "?." can only share "..",
# which is not a file name) are where overlap is most subtle.
_GEN_TOKENS = [*TOKENS, ".", "?"]
_token_lists = st.lists(st.sampled_from(_GEN_TOKENS), min_size=1, max_size=2)


@st.composite
def patterns(draw: st.DrawFn) -> str:
    norm = _build(draw(st.lists(_token_lists, min_size=1, max_size=3)), draw(st.booleans()))
    assume(norm is not None)
    assert norm is not None
    return norm


@st.composite
def pattern_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """Two patterns, half the time independent and half the time near-misses.

    Independent patterns rarely line up well enough to probe the interesting cases
    (a "**" that must not eat part of a segment, ".?" against "?.", ...), so the
    related mode derives both from one skeleton with random token substitutions and
    segment insertions/deletions.
    """
    if draw(st.booleans()):
        return draw(patterns()), draw(patterns())
    skeleton = draw(st.lists(_token_lists, min_size=1, max_size=3))

    def variant() -> str | None:
        segments = [
            [tok if draw(st.booleans()) else draw(st.sampled_from(_GEN_TOKENS)) for tok in seg] for seg in skeleton
        ]
        if len(segments) > 1 and draw(st.booleans()):
            del segments[draw(st.integers(0, len(segments) - 1))]
        if draw(st.booleans()):
            segments.insert(draw(st.integers(0, len(segments))), ["**"])
        return _build(segments, draw(st.booleans()))

    p, q = variant(), variant()
    assume(p is not None and q is not None)
    assert p is not None and q is not None
    return p, q


def _oracle_overlaps(p: str, q: str) -> bool:
    counts = _file_counts(p) & _file_counts(q)
    return any(matches(p, f) and matches(q, f) for n in sorted(counts) for f in UNIVERSE_BY_COUNT[n])


@settings(max_examples=1000, deadline=None)
@given(pattern_pairs())
def test_overlaps_agrees_with_brute_force(pair: tuple[str, str]) -> None:
    p, q = pair
    assert overlaps(p, q) == _oracle_overlaps(p, q)


@settings(max_examples=200, deadline=None)
@given(pattern_pairs())
def test_overlaps_symmetric_and_prefix_filter_sound(pair: tuple[str, str]) -> None:
    p, q = pair
    result = overlaps(p, q)
    assert overlaps(q, p) == result
    if result:
        lp, lq = literal_prefix(p), literal_prefix(q)
        assert lp.startswith(lq) or lq.startswith(lp)


@settings(max_examples=200, deadline=None)
@given(patterns())
def test_pattern_overlaps_itself(p: str) -> None:
    assert overlaps(p, p)


@settings(max_examples=200, deadline=None)
@given(patterns(), st.sampled_from(UNIVERSE))
def test_matches_agrees_with_overlaps_on_literal_files(p: str, f: str) -> None:
    assert matches(p, f) == overlaps(p, f)
    if matches(p, f):
        assert f.startswith(literal_prefix(p))


def _token_regex(segment: str) -> str:
    out = []
    for token in re.findall(r"\[ab\]|\[!a\]|\*+|\?|\.|a|b", segment):
        if token.startswith("*"):
            out.append("[^/]*")
        else:
            out.append({"[ab]": "[ab]", "[!a]": "[^a/]", "?": "[^/]", ".": r"\."}.get(token, token))
    return "".join(out)


def _pattern_regex(pattern: str) -> str:
    """Independent translation of a generated, normalised pattern into a Python regex."""
    is_dir = pattern.endswith("/")
    parts = (pattern[:-1] if is_dir else pattern).split("/") + (["**"] if is_dir else [])
    out = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(r"[^/]+(?:/[^/]+)*" if last else r"(?:[^/]+/)*")
        else:
            out.append(_token_regex(part) + ("" if last else "/"))
    return "".join(out)


@settings(max_examples=100, deadline=None)
@given(patterns())
def test_matches_agrees_with_regex_translation(p: str) -> None:
    regex = re.compile(_pattern_regex(p))
    for n in (1, 2, 3):
        for f in UNIVERSE_BY_COUNT[n]:
            assert matches(p, f) == bool(regex.fullmatch(f)), (p, f)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab./*?[]!^-\\\x00\u00e9", max_size=12))
def test_normalise_is_idempotent_and_reasons_are_known(raw: str) -> None:
    reasons = {
        "empty",
        "absolute",
        "dotdot",
        "control_char",
        "too_long",
        "too_many_wildcards",
        "bad_class",
        "trailing_escape",
    }
    try:
        norm = normalise_path(raw)
    except PathError as exc:
        assert exc.reason in reasons
        return
    assert normalise_path(norm) == norm
    assert "//" not in norm
    assert not norm.startswith("/")
    assert "." not in norm.split("/")
    # Every valid pattern names at least one file, so a claim always conflicts with
    # itself.
    assert overlaps(norm, norm)
