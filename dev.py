#!/usr/bin/env python3
"""The two commands a new user needs, on a machine with only python3.

    python3 dev.py serve [eventcoord serve options]   run the service (SQLite + embedded NATS)
    python3 dev.py test  [pytest options]             run the test suite
    python3 dev.py lint                               ruff (check and format --check) and mypy, as CI runs them

The first run creates ``.venv`` and installs the project: the runtime only for serve, with
its test dependencies for test and lint; later runs reinstall only when pyproject.toml
changed or a command needs the test dependencies that are not installed yet.
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
#: The extras each command needs: serving needs the runtime only; tests and lint need the
#: test tools too (pytest, playwright, schemathesis, ruff, mypy).
EXTRAS = {"serve": "", "test": "test", "lint": "test"}


def requirement(extras: str) -> str:
    """What pip installs (editable) for ``extras``: the checkout, with the extras named."""
    return f"{ROOT}[{extras}]" if extras else str(ROOT)


def stamp_text(digest: str, extras: str) -> str:
    """What the stamp records after an install: pyproject.toml's digest and the extras."""
    return f"{digest} {extras}".rstrip()


def installed(stamp: str | None, digest: str, extras: str) -> bool:
    """Whether an install recorded as ``stamp`` serves ``extras`` for this pyproject.toml.

    An install with the test extras serves a command that needs the runtime only; a
    runtime-only install does not serve tests or lint; a changed pyproject.toml serves nothing.
    """
    if stamp is None:
        return False
    got, _, got_extras = stamp.partition(" ")
    return got == digest and (not extras or extras in got_extras.split(","))


def ensure_venv(extras: str) -> None:
    """Create the virtual environment and install the project (with ``extras``) when needed."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if installed(STAMP.read_text() if STAMP.exists() else None, digest, extras):
        return
    if not (BIN / "python").exists():
        print("dev.py: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    what = "eventcoord and its test dependencies" if extras else "eventcoord"
    print(f"dev.py: installing {what}", flush=True)
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "-q", "-e", requirement(extras)], check=True)
    STAMP.write_text(stamp_text(digest, extras))


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in EXTRAS:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    ensure_venv(EXTRAS[command])
    os.chdir(ROOT)
    if command == "serve":
        os.execv(str(BIN / "eventcoord"), [str(BIN / "eventcoord"), "serve", *rest])
    if command == "test":
        return subprocess.call([str(BIN / "python"), "-m", "pytest", *rest])
    trees = ["src", "projections", "tests", "bench", "migrations", "dev.py"]
    ruff = subprocess.call([str(BIN / "ruff"), "check", *trees])
    formatted = subprocess.call([str(BIN / "ruff"), "format", "--check", *trees])
    return ruff or formatted or subprocess.call([str(BIN / "mypy")])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
