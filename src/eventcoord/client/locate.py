"""Finding the server and its token (SPEC §7): flags, then environment, then the local data folder.

The URL: ``--url``, else ``EVENTCOORD_URL``, else the local embedded server
``http://127.0.0.1:8765``. The token: ``--token``, else ``EVENTCOORD_TOKEN``, else
``EVENTCOORD_BOOTSTRAP_TOKEN`` (the operator's, when the shell started the server with it),
else the ``admin-token`` file that ``serve`` writes on first run into its data folder:
``$EVENTCOORD_DATA_DIR``, or ``./.eventcoord`` in this directory or the nearest parent that
has one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8765"
DATA_DIR = ".eventcoord"
TOKEN_FILE = "admin-token"


@dataclass(frozen=True, slots=True)
class Target:
    """Where to send requests and with which bearer token; ``source`` says where the token came from."""

    url: str
    token: str
    source: str


def token_file(start: Path | None = None) -> Path | None:
    """The local ``admin-token`` file, if there is one."""
    env_dir = os.environ.get("EVENTCOORD_DATA_DIR")
    if env_dir:
        candidate = Path(env_dir) / TOKEN_FILE
        return candidate if candidate.is_file() else None
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DATA_DIR / TOKEN_FILE
        if candidate.is_file():
            return candidate
    return None


def locate(url: str | None = None, token: str | None = None, start: Path | None = None) -> Target:
    """The server to talk to; an empty token means none was found (the server will answer 401)."""
    env = os.environ
    found_url = (url or env.get("EVENTCOORD_URL") or DEFAULT_URL).rstrip("/")
    if token:
        return Target(found_url, token, "--token")
    for name in ("EVENTCOORD_TOKEN", "EVENTCOORD_BOOTSTRAP_TOKEN"):
        if env.get(name):
            return Target(found_url, env[name], name)
    path = token_file(start)
    if path is not None:
        return Target(found_url, path.read_text().strip(), str(path))
    return Target(found_url, "", "none")
