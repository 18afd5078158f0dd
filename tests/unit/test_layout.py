"""The layout the docs promise: every room in the architecture table, imports flowing one
way, one import path for the projections, a handler for every command."""

from __future__ import annotations

import ast
import itertools
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

from eventcoord.commands import COMMAND_TYPES
from eventcoord.handlers import HANDLERS

PACKAGE = ROOT / "src" / "eventcoord"
PROJECTIONS = ROOT / "projections"


def is_empty_package(path: Path) -> bool:
    """An ``__init__.py`` with nothing but its docstring (and ``from __future__``)."""
    body = ast.parse(path.read_text()).body
    return all(
        (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        or (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        for node in body
    )


def modules() -> set[str]:
    """Every module of the package (relative to it) and of projections/ (as ``projections/…``)."""
    found = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")}
    found |= {f"projections/{p.relative_to(PROJECTIONS)}" for p in PROJECTIONS.rglob("*.py")}
    return {
        m
        for m in found
        if not (
            m.endswith("__init__.py") and is_empty_package((PACKAGE if not m.startswith("projections/") else ROOT) / m)
        )
    }


def expand(entry: str) -> list[str]:
    """``domain/{a,b}.py`` -> ``domain/a.py``, ``domain/b.py``."""
    parts = re.split(r"\{([^}]*)\}", entry)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def table_entries() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## The rooms", 1)[1].split("\n## ", 1)[0]
    listed: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            for entry in re.findall(r"`([^`]+\.py)`", first_cell):
                listed.update(expand(entry))
    return listed


def test_the_architecture_table_lists_every_module_and_only_real_ones() -> None:
    listed, present = table_entries(), modules()
    assert sorted(present - listed) == [], "modules missing from docs/architecture.md's table of rooms"
    assert sorted(listed - present - {"__init__.py"}) == [], "the table names modules that do not exist"


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_nothing_downstream_imports_upstream() -> None:
    upstream = {
        PACKAGE / "domain": (
            "eventcoord.store",
            "eventcoord.api",
            "eventcoord.handlers",
            "eventcoord.service",
            "eventcoord.projections",
        ),
        PACKAGE / "handlers": ("eventcoord.api", "eventcoord.service"),
        PACKAGE / "store": ("eventcoord.api", "eventcoord.handlers", "eventcoord.service"),
        PROJECTIONS: ("eventcoord.api", "eventcoord.handlers", "eventcoord.service"),
    }
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for folder, banned in upstream.items()
        for path in folder.rglob("*.py")
        for name in imports_of(path)
        if name.startswith(banned)
    ]
    assert wrong == []


def test_projections_have_one_import_path() -> None:
    """``eventcoord.projections`` is the top-level folder, and nothing imports it as ``projections``."""
    import eventcoord.projections

    assert Path(eventcoord.projections.__file__).parent.resolve() == PROJECTIONS
    # The package holds a link to the folder, never a second copy of it.
    for name in ("projections", "migrations"):
        assert (PACKAGE / name).is_symlink() and (PACKAGE / name).resolve() == ROOT / name
    # From the checkout's root, where a top-level ``projections`` would be importable.
    probe = (
        "import sys, eventcoord.api.app, eventcoord.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'projections'))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_every_command_has_a_handler() -> None:
    assert set(HANDLERS) == set(COMMAND_TYPES.values())
