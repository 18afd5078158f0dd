#!/usr/bin/env python3
"""The two commands a new user needs, on a machine with only python3.

    python3 dev.py serve [eventcoord serve options]   run the service (SQLite + embedded NATS)
    python3 dev.py test  [pytest options]             run the test suite
    python3 dev.py lint                               ruff (check and format --check) and mypy, as CI runs them

The first run creates ``.venv`` and installs the project with its test dependencies;
later runs reinstall only when pyproject.toml changed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".eventcoord-installed"
#: What mypy sees of the package-dir mapping (pyproject's mypy_path): static checkers do
#: not run the editable install's import hook, so projections/ is linked in here.
TYPECHECK = VENV / "typecheck"


def ensure_venv() -> None:
    """Create the virtual environment and install the project when needed."""
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == want:
        return
    if not (BIN / "python").exists():
        print("dev.py: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print("dev.py: installing eventcoord and its test dependencies", flush=True)
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "-q", "-e", f"{ROOT}[test]"], check=True)
    STAMP.write_text(want)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("serve", "test", "lint"):
        print(__doc__)
        return 2
    ensure_venv()
    command, rest = argv[0], argv[1:]
    os.chdir(ROOT)
    if command == "serve":
        os.execv(str(BIN / "eventcoord"), [str(BIN / "eventcoord"), "serve", *rest])
    if command == "test":
        return subprocess.call([str(BIN / "python"), "-m", "pytest", *rest])
    trees = ["src", "projections", "tests", "bench", "migrations", "dev.py"]
    ruff = subprocess.call([str(BIN / "ruff"), "check", *trees])
    formatted = subprocess.call([str(BIN / "ruff"), "format", "--check", *trees])
    return ruff or formatted or typecheck()


def typecheck() -> int:
    """mypy --strict on src/ and projections/ (as ``eventcoord.projections``, like the wheel)."""
    link = TYPECHECK / "eventcoord" / "projections"
    if not (link.is_symlink() and link.resolve() == ROOT / "projections"):
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(ROOT / "projections", target_is_directory=True)
    done = subprocess.run([str(BIN / "mypy")], capture_output=True, text=True)
    # Name projections/ files by their place in the checkout, not by the link.
    shown = str(link.relative_to(ROOT)) + os.sep
    sys.stdout.write(done.stdout.replace(shown, "projections" + os.sep))
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
