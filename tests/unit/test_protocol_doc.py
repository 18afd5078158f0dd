"""docs/protocol.md names everything the code speaks: every command, event type, error code
(with its status) and read route, and nothing the code does not have."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import ROOT

from eventcoord.client.operations import READS
from eventcoord.commands import COMMAND_TYPES
from eventcoord.errors import ErrorCode
from eventcoord.events import EVENT_TYPES

DOC = ROOT / "docs" / "protocol.md"


def section(heading: str, doc: Path = DOC) -> str:
    """The text under ``## heading`` up to the next heading of the same level."""
    text = doc.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_rows(text: str) -> list[list[str]]:
    """The cells of every table row (header and rule rows left out)."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("| ") or set(line) <= {"|", "-", " "}:
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows[1:] if rows else rows


def first_names(text: str) -> set[str]:
    """The backticked name that opens the first cell of each table row."""
    names = set()
    for cells in table_rows(text):
        m = re.match(r"`([^`]+)`", cells[0])
        if m:
            names.add(m.group(1))
    return names


def test_every_command_is_documented_and_only_real_ones() -> None:
    assert first_names(section("Commands")) == set(COMMAND_TYPES)


def test_every_event_type_is_documented_and_only_real_ones() -> None:
    assert first_names(section("Events")) == set(EVENT_TYPES)


def test_every_error_code_is_documented_with_its_status() -> None:
    documented = {}
    for cells in table_rows(section("Errors")):
        m = re.fullmatch(r"`([A-Z_]+)`", cells[0])
        if m:
            documented[m.group(1)] = int(cells[1])
    assert documented == {code.value: code.status for code in ErrorCode}


def test_every_read_route_is_documented_and_only_real_ones() -> None:
    routes = {f"GET {op.path}" for op in READS} | {"GET /v1/events/stream"}
    documented = set()
    for cells in table_rows(section("Reads")):
        m = re.fullmatch(r"`(GET /\S+)`", cells[0])
        if m:
            documented.add(m.group(1))
    assert documented == routes


def test_every_read_is_named_among_the_mcp_tools() -> None:
    clients = section("Clients")
    assert [op.name for op in READS if f"`{op.name}`" not in clients] == []


def documents() -> list[Path]:
    """Every documentation page of the repository."""
    top = [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    return (
        [p for p in top if p.exists()] + sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "bench").rglob("*.md"))
    )


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page``."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {github_anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_links_between_the_documents_resolve() -> None:
    """A relative link names a file that exists and, after ``#``, one of its headings."""
    broken = []
    for page in documents():
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            missing = not dest.exists() or (bool(anchor) and dest.suffix == ".md" and anchor not in anchors(dest))
            if missing:
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_the_documentation_cites_no_spec_section() -> None:
    """The repository's own protocol document replaced the references to an outside spec."""
    assert [str(p.relative_to(ROOT)) for p in documents() if re.search(r"SPEC ?§", p.read_text())] == []


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")
