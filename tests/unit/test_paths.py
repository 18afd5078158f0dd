"""Examples for eventcoord.domain.paths: normalisation, matching, overlap, literal prefixes."""

from __future__ import annotations

import gc
import random

import pytest

from eventcoord.domain.paths import (
    PathError,
    literal_prefix,
    matches,
    normalise_path,
    overlaps,
    syntax,
)

# ------------------------------------------------------------------------ normalisation


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a", "a"),
        ("a/b", "a/b"),
        ("a//b", "a/b"),
        ("a///b//", "a/b/"),
        ("./a", "a"),
        ("a/./b", "a/b"),
        ("./././a/./", "a/"),
        ("a/.", "a/"),
        ("src/", "src/"),
        (".hidden", ".hidden"),
        ("a/.b/...", "a/.b/..."),
        ("src/**/*.py", "src/**/*.py"),
        ("a\\*b", "a\\*b"),
        ("a\\\\b", "a\\\\b"),
        ("a\\b", "a\\b"),
        ("[!a]x/[]]/[a-]", "[!a]x/[]]/[a-]"),
        ("Ünï cødé/ä b", "Ünï cødé/ä b"),
        ("x" * 1024, "x" * 1024),
        ("/".join(["*"] * 16), "/".join(["*"] * 16)),
        ("/".join(["**"] * 16), "/".join(["**"] * 16)),
        ("***a***", "***a***"),
        ("*.", "*."),
    ],
)
def test_normalise_valid(raw: str, expected: str) -> None:
    assert normalise_path(raw) == expected
    assert normalise_path(expected) == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty"),
        (".", "empty"),
        ("./", "empty"),
        ("././/.", "empty"),
        ("/a", "absolute"),
        ("/", "absolute"),
        ("//a", "absolute"),
        ("..", "dotdot"),
        ("a/../b", "dotdot"),
        ("a/..", "dotdot"),
        ("../", "dotdot"),
        ("\\.", "dotdot"),
        ("\\.\\.", "dotdot"),
        ("\\..", "dotdot"),
        ("[.]", "dotdot"),
        ("a/[.][.]/b", "dotdot"),
        ("a\x00b", "control_char"),
        ("a\nb", "control_char"),
        ("a\x1f", "control_char"),
        ("a\x7f", "control_char"),
        ("a\x85", "control_char"),
        ("a\x9f", "control_char"),
        ("x" * 1025, "too_long"),
        ("./" * 600 + "a", "too_long"),  # checked on the raw input
        ("x" * 1025 + "\x00", "too_long"),
        ("/".join(["*"] * 17), "too_many_wildcards"),
        ("?" * 17, "too_many_wildcards"),
        ("[ab]" * 17, "too_many_wildcards"),
        ("/".join(["**"] * 16) + "/a*", "too_many_wildcards"),
        ("[ab", "bad_class"),
        ("a[", "bad_class"),
        ("[]", "bad_class"),
        ("[!]", "bad_class"),
        ("[a\\", "bad_class"),
        ("[z-a]", "bad_class"),
        ("[a/b]", "bad_class"),
        ("[[:alpha:]]", "bad_class"),
        ("[!\u0020-\U0010ffff]", "bad_class"),
        ("a\\", "trailing_escape"),
        ("a\\/b", "trailing_escape"),
        ("\\", "trailing_escape"),
    ],
)
def test_normalise_invalid(raw: str, reason: str) -> None:
    with pytest.raises(PathError) as excinfo:
        normalise_path(raw)
    assert excinfo.value.reason == reason
    assert isinstance(excinfo.value, ValueError)


def test_functions_reject_invalid_patterns() -> None:
    for call in (
        lambda: overlaps("a", "../b"),
        lambda: overlaps("/a", "b"),
        lambda: matches("[ab", "a"),
        lambda: literal_prefix(""),
    ):
        with pytest.raises(PathError):
            call()


# ---------------------------------------------------------------------------- matching


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("src/a.py", "src/a.py", True),
        ("src/a.py", "src/a.pyc", False),
        ("src/a.py", "Src/a.py", False),  # case-sensitive
        ("src/", "src/a", True),
        ("src/", "src/x/y", True),
        ("src/", "src", False),
        ("src/", "srcx/a", False),
        ("*", ".hidden", True),
        ("*", "a/b", False),
        ("*.py", "a.py", True),
        ("*.py", "d/a.py", False),
        ("src/*.py", "src/a/b.py", False),
        ("src/**/*.py", "src/a/b.py", True),
        ("src/**/*.py", "src/b.py", True),
        ("src/**/*.py", "src/a/b/c/d.py", True),
        ("a/**", "a", False),
        ("a/**", "a/x", True),
        ("a/**", "a/x/y", True),
        ("**/x", "x", True),
        ("**/x", "a/b/x", True),
        ("**/x", "a/bx", False),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**/b", "a/xb", False),
        ("a**b", "axyb", True),
        ("a**b", "ax/yb", False),
        ("**", "a", True),
        ("**", "a/b/c", True),
        ("**/", "a", True),
        ("*/", "a", False),
        ("*/", "a/b", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("a?c", "ac", False),
        ("[ab].txt", "a.txt", True),
        ("[ab].txt", "c.txt", False),
        ("[!ab].txt", "c.txt", True),
        ("[^ab].txt", "a.txt", False),
        ("[a-c]", "b", True),
        ("[a-c]", "d", False),
        ("[]]", "]", True),
        ("[!]]", "a", True),
        ("[!]]", "]", False),
        ("[a-]", "-", True),
        ("[\\]]", "]", True),
        ("[Z-\\]]", "]", True),
        ("[z-ab]", "b", True),  # a reversed range matches nothing
        ("[z-ab]", "c", False),
        ("[+-0]", "-", True),
        ("\\*", "*", True),
        ("\\*", "a", False),
        ("\\[a]", "[a]", True),
        ("a\\b", "ab", True),
        ("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "a" * 1000, False),
        ("./src//a.py", "src/a.py", True),
        # Not valid file paths: never matched.
        ("*", "", False),
        ("**", "a/", False),
        ("**", "/a", False),
        ("**", "a//b", False),
        ("**", "a/./b", False),
        ("**", "..", False),
        ("*", ".", False),
        ("*", "a\x00", False),
    ],
)
def test_matches_examples(pattern: str, path: str, expected: bool) -> None:
    assert matches(pattern, path) is expected


# ----------------------------------------------------------------------------- overlap


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("src/", "src/a.py", True),
        ("src/*.py", "src/a/b.py", False),
        ("src/**/*.py", "src/a/b.py", True),
        ("*", ".hidden", True),
        ("*.py", "*.js", False),
        ("*.py", "a.*", True),
        ("[ab].txt", "c.txt", False),
        ("[ab].txt", "[!a].txt", True),
        ("[ab].txt", "[!ab].txt", False),
        ("a/**/b", "a/b", True),
        ("**", "x/y/z", True),
        ("**", "*", True),
        ("**", ".a/.b/", True),
        ("src", "src/", False),
        ("src", "src", True),
        ("src/", "src/sub/", True),
        ("src/", "srcx/", False),
        ("src/", "src/**", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("\\*", "*", True),
        ("\\*", "a", False),
        ("\\*", "\\*", True),
        ("\\a/b", "a/b", True),  # escapes are decoded before comparing
        ("a/*", "*/b", True),
        (".*", "*.", True),  # needs ".x." since "." and ".." are not file names
        (".?", "?.", False),  # only ".." would match both
        ("?", "?", True),
        ("?", "??", False),
        ("a/**", "a", False),
        ("a/**", "a/", True),
        ("**/", "a", True),
        ("*/", "a", False),
        ("*/", "**/x", True),
        ("x/**/y/**/z", "x/y/z", True),
        ("**/a/**", "b/**", True),
        ("**/a/*", "b/*", False),
        ("a/**/b", "a/*/c", False),
        ("[.]x", ".x", True),
        ("*", "*/", False),
        ("a*/", "*b/c", True),
        ("Src/", "src/a", False),
        ("[a-c]x", "[!b]?", True),
        ("[a-c]", "[d-f]", False),
        ("\u00e9*", "?\u00e9", True),
    ],
)
def test_overlaps_examples(a: str, b: str, expected: bool) -> None:
    assert overlaps(a, b) is expected
    assert overlaps(b, a) is expected


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("src/a/*.py", "src/a/"),
        ("*.py", ""),
        ("src/a.py", "src/a.py"),
        ("src/", "src/"),
        ("src/a/", "src/a/"),
        ("src/**/x", "src/"),
        ("a/b*/c", "a/"),
        ("**", ""),
        ("\\*/x*", "*/"),
        ("a//b/./c*", "a/b/"),
    ],
)
def test_literal_prefix(pattern: str, expected: str) -> None:
    assert literal_prefix(pattern) == expected


# -------------------------------------------------------------------------------- scale


def test_many_requests_against_many_claims() -> None:
    rng = random.Random(1234)
    dirs = [f"src/pkg{i}/mod{j}" for i in range(20) for j in range(10)]
    claims: list[str] = []
    for i in range(500):
        d = rng.choice(dirs)
        kind = i % 6
        if kind == 0:
            claims.append(f"{d}/")
        elif kind == 1:
            claims.append(f"{d}/*.py")
        elif kind == 2:
            claims.append(f"{d}/file{i}.py")
        elif kind == 3:
            claims.append(f"{d.rsplit('/', 1)[0]}/**/test_*.py")
        elif kind == 4:
            claims.append(f"docs/**/page{i}.md")
        else:
            claims.append(f"**/gen{i}/*.[ch]")
    requests: list[str] = []
    for i in range(100):
        d = rng.choice(dirs)
        if i % 10 == 0:
            requests.append(f"{d}/**")
        elif i % 10 == 1:
            requests.append(f"{d}/test_*.py")
        else:
            requests.append(f"{d}/file{rng.randrange(600)}.py")
    hits = sum(overlaps(r, c) for r in requests for c in claims)
    assert 0 < hits < len(requests) * len(claims)


def test_a_cached_patterns_characters_are_no_objects_for_the_collector() -> None:
    """``analyse`` keeps parsed patterns for the life of the process (an LRU of 8,192). Their
    segments must be tuples of strings, which the cyclic collector stops tracking, not
    tuples of one object per character that it walks on every full pass (~70,000 under a
    claim_files load: 75 ms pauses of the event loop), nor patterns it tracks."""
    _, pattern = syntax.analyse("src/app/models/user_profile.py")
    gc.collect()  # untracks the segments (tuples of strings), then the tuple of them
    gc.collect()
    assert not gc.is_tracked(pattern)  # holds no object that could close a cycle
    assert pattern.segments and not gc.is_tracked(pattern.segments)
    assert not any(gc.is_tracked(segment) for segment in pattern.segments)
