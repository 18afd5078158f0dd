"""Comments and docstrings say why and point at our own documents: no outside spec's
sections, no phase or issue numbers, short module docstrings, and links that resolve."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import ROOT
from tests.unit.test_protocol_doc import anchors

#: Where the code lives: every Python file here is checked.
CODE = [ROOT / "src", ROOT / "tests", ROOT / "bench", ROOT / "migrations", ROOT / "projections", ROOT / "dev.py"]
#: Module docstrings under src/ stay this short (STYLE.md: one to three lines, ten at most).
MAX_MODULE_DOCSTRING_LINES = 10

#: A section of an outside specification ("SPEC §5", "§8"); an RFC's section is fine.
SPEC_SECTION = re.compile(r"\bSPEC\b\s*(?:§|#)|(?<!RFC )(?<!\d )§\s*\d")
#: When a change was made instead of why: "phase 14", "issue 12", "issue #3" (a GitHub issue
#: number in the GitHub mirror's own words is a thing the code handles, not a history).
WHEN = re.compile(r"(?<!github )\b(?:phase|issue)s?\s+#?\d", re.IGNORECASE)
#: A link from the code to a page of docs/, with its anchor if any.
DOC_LINK = re.compile(r"\bdocs/([\w./-]+?\.md)(?:#([\w-]+))?")


def python_files() -> list[Path]:
    """Every Python file of the code, this module's own patterns included."""
    files: list[Path] = []
    for place in CODE:
        files.extend([place] if place.is_file() else sorted(place.rglob("*.py")))
    return [p for p in files if ".venv" not in p.parts]


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """The comments and docstrings of ``path``, each with its first line number."""
    text = path.read_text()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield node.lineno, node.value.value


def where(path: Path, line: int, text: str) -> str:
    return f"{path.relative_to(ROOT)}:{line}: {text.strip()[:100]}"


def dashboard_files() -> list[Path]:
    """The dashboard's own scripts, pages and styles."""
    static = ROOT / "src" / "eventcoord" / "ui" / "static"
    return sorted(p for p in static.rglob("*") if p.suffix in {".js", ".html", ".css"})


def test_no_file_cites_a_section_of_an_outside_spec() -> None:
    """docs/protocol.md replaced the outside spec: code links its anchors instead."""
    found = [
        where(path, n, line)
        for path in python_files() + dashboard_files()
        if path != Path(__file__)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SPEC_SECTION.search(line)
    ]
    assert found == []


def test_no_comment_says_when_instead_of_why() -> None:
    """The history of a change goes in its commit and bench/results/, not in the code."""
    found = [
        where(path, n, text)
        for path in python_files()
        if path != Path(__file__)
        for n, text in prose(path)
        if WHEN.search(text.replace("\n", " "))
    ]
    assert found == []


def test_module_docstrings_under_src_are_at_most_ten_lines() -> None:
    """A long explanation belongs in docs/architecture.md or a decision record."""
    long = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
        if doc is not None and len(doc.strip().splitlines()) > MAX_MODULE_DOCSTRING_LINES:
            long.append(f"{path.relative_to(ROOT)}: {len(doc.strip().splitlines())} lines")
    assert long == []


def test_every_document_and_anchor_the_code_cites_exists() -> None:
    """``docs/protocol.md#releases`` in a comment or docstring names a heading that is there."""
    broken = []
    for path in python_files():
        for n, text in prose(path):
            for page, anchor in DOC_LINK.findall(text):
                doc = ROOT / "docs" / page
                if not doc.is_file() or (anchor and anchor not in anchors(doc)):
                    broken.append(where(path, n, f"docs/{page}#{anchor}" if anchor else f"docs/{page}"))
    assert broken == []


def test_the_patterns_catch_what_they_are_for() -> None:
    """The checks above would fail on the comments they exist to keep out."""
    assert SPEC_SECTION.search("# the order of SPEC §5") and SPEC_SECTION.search("§8), on both backends.")
    assert not SPEC_SECTION.search("# The auth scheme is case-insensitive (RFC 9110 §11.1).")
    assert WHEN.search("docs/performance.md, phase 14") and WHEN.search("(Issue 11 defect 3)")
    assert not WHEN.search("# no GitHub issue 99: skipped") and not WHEN.search("an issue's lease")
    assert DOC_LINK.findall("see docs/protocol.md#releases.") == [("protocol.md", "releases")]
    assert "releases" in anchors(ROOT / "docs" / "protocol.md")
