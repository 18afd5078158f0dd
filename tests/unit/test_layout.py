"""The layout the docs promise: every room in the architecture table, imports flowing one
way (and never in a circle), one import path for the projections, a handler for every command."""

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
        PACKAGE / "reads": ("eventcoord.api", "eventcoord.handlers", "eventcoord.service"),
        PACKAGE / "store": ("eventcoord.api", "eventcoord.handlers", "eventcoord.reads", "eventcoord.service"),
        # History reads and rebuilds the log off the command path, beside the API: it may use
        # the store and the projections, never the faces above it or the write side.
        PACKAGE / "history": (
            "eventcoord.api",
            "eventcoord.handlers",
            "eventcoord.reads",
            "eventcoord.service",
            "eventcoord.bootstrap",
            "eventcoord.cli",
            "eventcoord.client",
            "eventcoord.mcp",
            "eventcoord.ui",
        ),
        PROJECTIONS: ("eventcoord.api", "eventcoord.handlers", "eventcoord.service"),
    }
    # PostgreSQL's reads ahead stand in for the read layer's loaders (``@substitute``).
    allowed = {PACKAGE / "store" / "postgres" / "ahead": ("eventcoord.reads",)}
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for folder, banned in upstream.items()
        for path in folder.rglob("*.py")
        for name in imports_of(path)
        if name.startswith(banned)
        and not any(path.is_relative_to(f) and name.startswith(ok) for f, ok in allowed.items())
    ]
    assert wrong == []


def test_projections_and_the_shared_store_import_no_backend() -> None:
    """The projections and the store's shared modules (``store/*.py``) run on both backends:
    they import nothing of ``store/sqlite`` or ``store/postgres``, not even lazily. Only
    ``store/__init__.py``'s ``open_store`` picks a backend, by URL."""
    shared = [p for p in (PACKAGE / "store").glob("*.py") if p.name != "__init__.py"]
    shared += list(PROJECTIONS.rglob("*.py"))
    assert len(shared) > 15 and PACKAGE / "store" / "log.py" in shared
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in shared
        for name in imports_of(path)
        if name.startswith(("eventcoord.store.sqlite", "eventcoord.store.postgres"))
    ]
    # ``from eventcoord.store import postgres`` names the package through its parent
    wrong += [
        f"{path.relative_to(ROOT)} imports eventcoord.store.{a.name}"
        for path in shared
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "eventcoord.store"
        for a in node.names
        if a.name in ("sqlite", "postgres")
    ]
    assert wrong == []


def test_neither_backend_imports_the_other() -> None:
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for mine, other in (("sqlite", "postgres"), ("postgres", "sqlite"))
        for path in (PACKAGE / "store" / mine).rglob("*.py")
        for name in imports_of(path)
        if name.startswith(f"eventcoord.store.{other}")
    ]
    assert wrong == []


def test_a_backend_import_in_a_shared_module_is_found(tmp_path: Path) -> None:
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from eventcoord.store.postgres import batch\n    return batch\n")
    assert "eventcoord.store.postgres" in imports_of(lazy)


#: The handlers other handlers may import, lowest first: each may import only those before it.
#: ``waits`` loads the lines every claim joins; ``named_leases`` and ``issues`` what a session's
#: end frees and what a pull reads. No handler imports files, queue, sessions, messages or tokens.
HANDLER_LAYERS = ("common", "waits", "named_leases", "issues")


def module_name(path: Path) -> str:
    """``src/eventcoord/a/b.py`` -> ``eventcoord.a.b``; a package's ``__init__.py`` -> the package;
    ``projections/x.py`` -> ``eventcoord.projections.x`` (its one import path)."""
    if path.is_relative_to(PROJECTIONS):
        parts = ["eventcoord", "projections", *path.relative_to(PROJECTIONS).with_suffix("").parts]
    else:
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the package it imports: every ``import`` and ``from … import`` at
    any depth (in functions, under ``TYPE_CHECKING``), relative ones resolved; ``from a import b``
    names the module ``a.b`` when there is one, else ``a``."""
    files = [
        p
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] not in ("projections", "migrations")  # links to the folders
    ] + list(PROJECTIONS.rglob("*.py"))
    paths = {module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for a in node.names:
                    found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base)
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:  # every module below path[-1] is done, and no cycle went through it
                done.add(path.pop())
                stack.pop()
            elif nxt in path:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in done:
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_no_module_imports_itself_in_a_circle() -> None:
    """Not through another module, not by a lazy import in a function, not for type checking."""
    graph = import_graph()
    assert len(graph) > 150 and "eventcoord.projections.files" in graph["eventcoord.reads.files"]
    assert cycle_in(graph) is None, " -> ".join(cycle_in(graph) or [])


def test_a_cycle_is_found_where_there_is_one() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_handlers_import_only_the_handlers_below_them() -> None:
    graph = import_graph()
    wrong = []
    for name, imported in graph.items():
        if not name.startswith("eventcoord.handlers."):
            continue
        mine = name.rsplit(".", 1)[1]
        below = HANDLER_LAYERS[: HANDLER_LAYERS.index(mine)] if mine in HANDLER_LAYERS else HANDLER_LAYERS
        for other in imported:
            if other.startswith("eventcoord.handlers") and other.rsplit(".", 1)[1] not in below:
                wrong.append(f"{name} imports {other}")
    assert sorted(wrong) == []


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


def test_the_wheel_names_every_package_under_src() -> None:
    """pyproject.toml lists the packages the wheel ships by name: a new package left out of
    it imports in the checkout and fails in every installed copy."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(PACKAGE.parent).parts) for init in PACKAGE.rglob("__init__.py")}
    assert found - listed == set()


def test_every_command_has_a_handler() -> None:
    assert set(HANDLERS) == set(COMMAND_TYPES.values())
