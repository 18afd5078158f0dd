"""The wheel as a user gets it: built, installed into a fresh virtualenv, served.

Nothing of the checkout is on the installed server's path, so this fails if the wheel
misses a package, the migrations or the projections (mapped from the top-level
``projections/`` folder by the build), or if the entry point is wrong.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import ROOT, Api, ServerProcess

pytestmark = pytest.mark.slow


def run(*argv: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def venv_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``bin/`` of a fresh virtualenv with the freshly built wheel installed."""
    work = tmp_path_factory.mktemp("wheel")
    # Build from a copy: an in-tree build leaves build/ behind, whose stale files a later
    # build would ship.
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("src", "projections", "migrations"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", work / "dist", source)
    [wheel] = (work / "dist").glob("eventcoord-*.whl")
    run(sys.executable, "-m", "venv", work / "venv")
    run(work / "venv" / "bin" / "python", "-m", "pip", "install", "-q", wheel)
    return work / "venv" / "bin"


def test_the_wheel_ships_one_import_path_for_projections_and_migrations(venv_bin: Path, tmp_path: Path) -> None:
    where = run(
        venv_bin / "python",
        "-c",
        "import eventcoord, eventcoord.projections.tables, eventcoord.migrations, importlib.resources as r;"
        "print(eventcoord.__file__);"
        "print(eventcoord.projections.__file__);"
        "print(sorted(p.name for p in r.files('eventcoord.migrations').joinpath('versions').iterdir()"
        " if p.name.endswith('.py')))",
        cwd=tmp_path,
    ).splitlines()
    site = venv_bin.parent / "lib"
    assert all(Path(line).is_relative_to(site) for line in where[:2]), where
    assert Path(where[1]).parent.name == "projections" and Path(where[1]).parent.parent.name == "eventcoord"
    assert "0001_initial_schema.py" in where[2]
    # The top-level folder is not a second package.
    done = subprocess.run(
        [str(venv_bin / "python"), "-c", "import projections"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 1 and "No module named 'projections'" in done.stderr


def test_the_wheel_is_typed_for_type_checkers(venv_bin: Path, tmp_path: Path) -> None:
    """py.typed ships, so a type checker reads the installed client's annotations."""
    marker = run(
        venv_bin / "python",
        "-c",
        "import importlib.resources as r; print(r.files('eventcoord').joinpath('py.typed').is_file())",
        cwd=tmp_path,
    )
    assert marker.strip() == "True"
    # A real type checker over code that uses the installed client: without py.typed mypy
    # reports the import as an untyped package and the wrong call below as nothing.
    (tmp_path / "agent.py").write_text(
        "from eventcoord.client import Client\n"
        "with Client() as ec:\n"
        "    me = ec.register_agent(actor='a')\n"
        "    ec.claim_issue(session_id=me.session_id, project='P', issue=7)\n"
    )
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--python-executable", str(venv_bin / "python"), "--no-incremental", "agent.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert 'Argument "issue" to "claim_issue" of "Issues" has incompatible type "int"' in checked.stdout, checked.stdout
    assert "import-untyped" not in checked.stdout and "missing library stubs" not in checked.stdout


async def test_the_installed_eventcoord_serves_a_command(venv_bin: Path, db_url: str, tmp_path: Path) -> None:
    """`eventcoord serve` from the wheel migrates (SQLite starts empty), decides, projects."""
    server = ServerProcess(db_url, tmp_path / "data", argv=[str(venv_bin / "eventcoord")], extra_env={"PYTHONPATH": ""})
    api = Api(server.base_url)
    try:
        sid = await api.register(actor="from-the-wheel")
        assert [e["type"] for e in await api.events()] == ["AgentRegistered"]
        assert (await api.agents())[sid]["actor_key"] == "from-the-wheel"
    finally:
        await api.close()
        server.stop()
    assert server.proc.args[0] == str(venv_bin / "eventcoord")
