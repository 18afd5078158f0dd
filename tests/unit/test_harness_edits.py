"""Which files a harness's tool call writes: patch envelopes, paths inside the working tree,
literal file names as claim patterns (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventcoord.domain.paths import matches, normalise_path
from eventcoord.errors import ValidationFailed
from eventcoord.harness.edits import claim_pattern, relative_to, targets, written_paths
from eventcoord.harness.patches import patch_paths

CWD = "/home/dev/proj"


def test_every_file_header_of_a_patch_is_read_in_order_each_once() -> None:
    patch = "\n".join(
        [
            "*** Begin Patch",
            "*** Add File: src/new.py",
            "+print('new')",
            "+*** Delete File: not/a/header.py",
            "*** Update File: src/old.py",
            "*** Move to: src/renamed.py",
            "@@ def f():",
            " *** Add File: context/line.py",
            "-    return 1",
            "+    return 2",
            "",
            "*** End of File",
            "*** Delete File: docs/gone.md",
            "  *** Update File: /home/dev/proj/padded.py  ",
            "@@",
            "-a",
            "+b",
            "*** Add File: src/new.py",
            "+again",
            "*** End Patch",
        ]
    )
    assert patch_paths(patch) == [
        "src/new.py",
        "src/old.py",
        "src/renamed.py",
        "docs/gone.md",
        "/home/dev/proj/padded.py",
    ]


def test_patch_forms_codex_also_accepts() -> None:
    crlf = "*** Begin Patch\r\n*** Add File: a.txt\r\n+x\r\n*** End Patch\r\n"
    assert patch_paths(crlf) == ["a.txt"]
    heredoc = "<<'EOF'\n*** Begin Patch\n*** Delete File: b.txt\n*** End Patch\nEOF"
    assert patch_paths(heredoc) == ["b.txt"]
    assert patch_paths("*** Add File: no-envelope.txt\n+x") == ["no-envelope.txt"]
    assert patch_paths("") == [] and patch_paths("just text\n*** End Patch") == []


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        (f"{CWD}/hello.txt", "hello.txt"),
        (f"{CWD}//src/./a.py", "src/a.py"),
        ("src/a.py", "src/a.py"),
        ("./src/a.py", "src/a.py"),
        (f"{CWD}/", None),
        (CWD, None),
        ("/etc/passwd", None),
        ("/home/dev/projother/a.txt", None),
        ("/home/dev", None),
        (f"{CWD}/../x", None),
        (f"{CWD}/a/../b", None),
        ("../x", None),
        ("a\x00b", None),
        ("", None),
    ],
)
def test_a_path_counts_only_inside_the_working_tree(path: str, relative: str | None) -> None:
    assert relative_to(path, CWD) == relative
    assert relative_to(path, CWD + "/") == relative


def test_a_working_tree_that_is_not_absolute_or_not_plain_claims_nothing() -> None:
    assert relative_to("a.py", "proj") is None
    assert relative_to("/w/x/a.py", "/w/../w/x") is None
    assert relative_to("a.py", "/w\x00") is None
    assert relative_to("a.py", "/") == "a.py"


@given(st.text(min_size=1, max_size=60))
def test_a_file_name_is_claimed_as_exactly_that_file(name: str) -> None:
    literal = relative_to(f"{CWD}/src/{name}", CWD)
    pattern = claim_pattern(literal) if literal is not None else None
    if literal is None or pattern is None:  # "..", NUL, control characters: never claimed
        assert ".." in name.split("/") or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name)
        return
    assert normalise_path(pattern) == pattern
    assert matches(pattern, literal)


def test_wildcard_characters_in_a_file_name_are_literal() -> None:
    pattern = claim_pattern("src/[id]*?.ts")
    assert pattern == "src/\\[id\\]\\*\\?.ts"
    assert matches(pattern, "src/[id]*?.ts") and not matches(pattern, "src/abc.ts")
    assert claim_pattern("back\\slash") == "back\\\\slash"
    assert claim_pattern("line\nbreak") is None and claim_pattern("x" * 1100) is None


@pytest.mark.parametrize(
    ("tool", "tool_input", "paths"),
    [
        ("Write", {"file_path": "/a/b.txt", "content": "x"}, ["/a/b.txt"]),
        ("Edit", {"file_path": "b.txt", "old_string": "a", "new_string": "b"}, ["b.txt"]),
        ("MultiEdit", {"file_path": "c.txt", "edits": []}, ["c.txt"]),
        ("NotebookEdit", {"notebook_path": "n.ipynb"}, ["n.ipynb"]),
        ("apply_patch", {"command": "*** Begin Patch\n*** Delete File: d.txt\n*** End Patch"}, ["d.txt"]),
        ("apply_patch", "*** Begin Patch\n*** Delete File: e.txt\n*** End Patch", ["e.txt"]),
        ("Bash", {"command": "echo > f.txt"}, None),
        ("Read", {"file_path": "g.txt"}, None),
        ("Task", None, None),
    ],
)
def test_the_writing_tools_and_their_paths(tool: str, tool_input: Any, paths: list[str] | None) -> None:
    assert written_paths(tool, tool_input) == paths


@pytest.mark.parametrize(
    ("tool", "tool_input", "field"),
    [
        ("Write", {"content": "x"}, "tool_input.file_path"),
        ("Edit", None, "tool_input.file_path"),
        ("MultiEdit", {"file_path": 3}, "tool_input.file_path"),
        ("NotebookEdit", {"file_path": "x"}, "tool_input.notebook_path"),
        ("apply_patch", {"patch": "x"}, "tool_input.command"),
        ("apply_patch", 5, "tool_input.command"),
    ],
)
def test_a_writing_tool_without_its_path_is_not_a_hook_payload(tool: str, tool_input: Any, field: str) -> None:
    with pytest.raises(ValidationFailed) as e:
        written_paths(tool, tool_input)
    assert e.value.details["field"] == field


def test_targets_keep_each_file_inside_cwd_once_with_the_name_the_session_used() -> None:
    patch = "\n".join(
        [
            "*** Begin Patch",
            f"*** Add File: {CWD}/src/a.py",
            "+x",
            "*** Update File: src/a.py",
            "*** Move to: /tmp/outside.py",
            "@@",
            "-x",
            "+y",
            "*** Delete File: ../up.txt",
            "*** Delete File: src/[x].py",
            "*** End Patch",
        ]
    )
    got = targets("apply_patch", {"command": patch}, CWD)
    assert got is not None
    assert [(t.pattern, t.path) for t in got] == [("src/a.py", "src/a.py"), ("src/\\[x\\].py", "src/[x].py")]
    assert targets("Bash", {"command": "ls"}, CWD) is None
    assert targets("Write", {"file_path": "/etc/passwd"}, CWD) == []
