"""Overlap at the limits of the pattern grammar: exact, symmetric, bounded in steps; its
caches bounded in bytes.

Exactness is checked against an independent oracle (the product automaton of
``reference_overlap``) on small alphabets, with as many wildcards as a pattern may have.
Cost is measured by the step counter every check charges (``paths.Work``), never by time.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tests.unit.reference_overlap import reference_overlaps

from eventcoord.domain.paths import (
    MAX_PATH_CHARS,
    MAX_PATTERN_CHARS,
    MAX_WILDCARDS,
    PathError,
    Work,
    WorkExceeded,
    normalise_path,
    overlap,
    overlaps,
    syntax,
)
from eventcoord.domain.paths.memo import ByteLru

# ------------------------------------------------------------------ the grammar, at its limits

#: Literal characters of a small alphabet ("." for the dot rules, "é" for more than ASCII),
#: the wildcards, and runs of a literal (long segments).
_WILD = ["*", "?", "[ab]", "[!a]", "[a-c]"]
_LITERAL = ["a", "b", ".", "é", "\\*"]


@st.composite
def _segment(draw: st.DrawFn, wildcards: int) -> tuple[str, int]:
    """A segment and the wildcards it used (at most ``wildcards``)."""
    if wildcards and draw(st.integers(0, 9)) == 0:
        return "**", 1
    out, used = "", 0
    for _ in range(draw(st.integers(1, 6))):
        if used < wildcards and draw(st.booleans()):
            out += draw(st.sampled_from(_WILD))
            used += 1
        else:
            out += draw(st.sampled_from(_LITERAL)) * draw(st.sampled_from([1, 1, 2, 5]))
    return out, used


@st.composite
def patterns(draw: st.DrawFn, max_chars: int = 64) -> str:
    """A valid pattern of up to ``max_chars`` characters and up to 16 wildcards."""
    budget = draw(st.integers(0, MAX_WILDCARDS))
    segments: list[str] = []
    for _ in range(draw(st.integers(1, 8))):
        segment, used = draw(_segment(budget))
        budget -= used
        segments.append(segment)
    raw = "/".join(segments) + ("/" if draw(st.integers(0, 4)) == 0 else "")
    assume(len(raw) <= max_chars)
    try:
        return normalise_path(raw)
    except PathError:
        assume(False)
        raise


@st.composite
def pattern_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """Independent patterns, or near misses of one skeleton (the cases where overlap is subtle)."""
    a = draw(patterns())
    if draw(st.booleans()):
        return a, draw(patterns())
    parts = a.rstrip("/").split("/")
    i = draw(st.integers(0, len(parts) - 1))
    edits = [
        lambda s: s + draw(st.sampled_from(_LITERAL)),
        lambda s: draw(st.sampled_from(_LITERAL)) + s,
        lambda s: s.replace("*", "?", 1),
        lambda s: s.replace("a", "[!a]", 1),
        lambda s: "**",
        lambda s: s + "/" + draw(st.sampled_from(["*", "**", "a"])),
    ]
    parts[i] = draw(st.sampled_from(edits))(parts[i])
    raw = "/".join(parts) + ("/" if a.endswith("/") else "")
    try:
        b = normalise_path(raw)
    except PathError:
        assume(False)
        raise
    return a, b


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(pattern_pairs())
def test_overlap_agrees_with_the_product_automaton_and_is_symmetric(pair: tuple[str, str]) -> None:
    a, b = pair
    expected = reference_overlaps(a, b)
    assert overlaps(a, b) is expected, (a, b)
    assert overlaps(b, a) is expected, (b, a)
    overlap.clear_caches()  # decided again without kept answers: the same
    assert overlaps(a, b) is expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(patterns())
def test_a_pattern_overlaps_itself_and_what_its_literal_text_says(p: str) -> None:
    assert overlaps(p, p)
    # every pattern matches at least one file: the reference says so too
    assert reference_overlaps(p, p)


# ---------------------------------------------------------------------- bounded work

#: Steps one pair may take, per character of both patterns: every rule is linear in the
#: atoms it reads, times at most 16 wildcards on either side (see ``globs``).
STEPS_PER_CHAR = 256
STEPS_PER_PAIR = 2_000


def _at_the_limit(draw: st.DrawFn, max_chars: int) -> str:
    raw = draw(patterns(max_chars=max_chars))
    # stretch a literal run towards the limit (the costly direction for a product of automata)
    room = max_chars - len(raw)
    if room > 0 and "a" in raw:
        raw = raw.replace("a", "a" * (1 + room // max(1, raw.count("a"))), 1)
    assume(len(raw) <= max_chars)
    try:
        return normalise_path(raw)
    except PathError:
        assume(False)
        raise


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, str]:
    """A pattern at its size limit against another, or against a plain path of 1,024 characters."""
    a = _at_the_limit(draw, MAX_PATTERN_CHARS)
    if draw(st.booleans()):
        return a, _at_the_limit(draw, MAX_PATTERN_CHARS)
    names = draw(st.lists(st.sampled_from(["a", "b", "é", "ab", ".a", "x" * 40]), min_size=1, max_size=400))
    plain = "/".join(names)[:MAX_PATH_CHARS].rstrip("/.")
    assume(plain)
    try:
        return a, normalise_path(plain)
    except PathError:
        assume(False)
        raise


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hostile())
def test_work_is_linear_in_the_sizes_whatever_the_patterns(pair: tuple[str, str]) -> None:
    a, b = pair
    overlap.clear_caches()
    work = Work()
    overlaps(a, b, work)
    assert work.spent <= STEPS_PER_PAIR + STEPS_PER_CHAR * (len(a) + len(b)), (a, b, work.spent)


def test_the_issues_glob_is_refused_and_its_kind_at_the_limit_costs_few_steps() -> None:
    """16 stars near the old limit took 1.25 s per check; now it is refused before any check,
    and the same shape at the limit of a pattern is decided by its ends."""
    attack = "*" + "*".join(["a" * 62] * 15) + "*c"
    try:
        normalise_path(attack)
        raise AssertionError("a pattern of 947 characters is refused")
    except PathError as e:
        assert e.reason == "too_long" and str(MAX_PATTERN_CHARS) in str(e)
    a = "*" + "*".join(["a" * 14] * 15) + "*c"
    b = "*" + "*".join(["a" * 14] * 15) + "*b"
    overlap.clear_caches()
    work = Work()
    assert not overlaps(a, b, work)
    assert work.spent < 1_000  # the product of both automata had ~200,000 states


def test_a_work_limit_stops_a_check_and_keeps_nothing_half_decided() -> None:
    names = "/".join(chr(0x100 + i) for i in range(511))
    pattern = "**/" + "/".join(f"[{chr(0x200 + i)}]" for i in range(14)) + "/x/**"
    overlap.clear_caches()
    unlimited = Work()
    assert not overlaps(pattern, names, unlimited)
    limited = Work(limit=unlimited.spent // 2)
    try:
        overlaps(pattern, names, limited)
        raise AssertionError("the limit stops the check")
    except WorkExceeded as e:
        assert e.limit == unlimited.spent // 2
    assert not overlaps(pattern, names, Work())  # and the answer afterwards is still right


# ---------------------------------------------------------------------- bounded caches


def test_the_caches_stay_within_their_bytes_on_long_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsed, compiled and decided patterns of 1,000 characters once grew the server to a
    gigabyte (a count of 8,192 each); the memory they hold now stays within their bytes.
    (The bounds are made small here so that a few thousand paths pass them.)"""
    caches = {syntax._ANALYSED: 2 << 20, overlap._COMPILED: 2 << 20, overlap._ANSWERS: 1 << 20}
    for cache, bound in caches.items():
        monkeypatch.setattr(cache, "max_bytes", bound)
        cache.clear()
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i in range(2_000):
            plain = f"d{i}/" + "/".join(["segment"] * 124) + f"/{i}.py"
            assert len(plain) <= MAX_PATH_CHARS
            normalise_path(plain)
        for i in range(1_500):
            pattern = f"p{i}/" + "/".join(["dir"] * 50) + "/*x?/" + "b" * 40 + "*"
            assert len(pattern) <= MAX_PATTERN_CHARS
            overlaps(pattern, f"p{i}/**/*.py")  # compiles both, keeps a costly answer
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    for cache, bound in caches.items():
        assert 0 < cache.bytes <= bound
    assert len(syntax._ANALYSED) < 2_000 and len(overlap._COMPILED) < 3_000  # they did drop entries
    # The estimates are honest: what is really held stays within the bounds, give or take.
    assert held - before <= 1.25 * sum(caches.values()), (held - before, sum(caches.values()))
    for cache in caches:
        cache.clear()


def test_a_byte_bounded_memo_drops_the_least_recently_used() -> None:
    memo: ByteLru[str, int] = ByteLru(100, lambda k, v: len(k))
    for key in ("a" * 40, "b" * 40):
        memo.put(key, 1)
    assert memo.get("a" * 40) == 1  # now the most recently used
    memo.put("c" * 40, 1)
    assert memo.get("b" * 40) is None and memo.get("a" * 40) == 1 and memo.bytes == 80
    memo.put("d" * 101, 1)  # larger than the whole bound: not kept
    assert memo.get("d" * 101) is None and memo.bytes == 80


def test_overlaps_within_is_undecided_once_the_steps_run_out_and_stays_so() -> None:
    from eventcoord.domain.paths import Work, overlaps_within

    deep = "/".join(chr(0x100 + i) for i in range(511)) + "/z"
    costly = "**/" + "/".join(f"[{chr(0x200 + i)}]" for i in range(14)) + f"/{chr(0x4E00)}/**"
    work = Work(60_000)
    assert overlaps_within(costly, deep, work) is False  # about 51,000 steps: decided
    assert not work.exhausted
    assert overlaps_within(costly, deep, work) is None  # would pass the limit: undecided
    assert work.exhausted
    spent = work.spent
    assert overlaps_within("a.py", "a.py", work) is None  # every later pair too, at no cost
    assert work.spent == spent
