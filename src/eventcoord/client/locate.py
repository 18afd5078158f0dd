"""Finding the server and its token (docs/protocol.md#clients): flags, then environment, then the local data folder.

The URL: ``--url``, else ``EVENTCOORD_URL``, else the local embedded server
``http://127.0.0.1:8765``. The token: ``--token``, else ``EVENTCOORD_TOKEN``, else
``EVENTCOORD_BOOTSTRAP_TOKEN`` (the operator's, when the shell started the server with it),
else the ``admin-token`` file that ``serve`` writes on first run into its data folder:
``$EVENTCOORD_DATA_DIR``, or ``./.eventcoord`` in this directory or the nearest parent that
has one. Only ``os`` is imported: the harness hook command finds its server with this too.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8765"
DATA_DIR = ".eventcoord"
TOKEN_FILE = "admin-token"


class Target:
    """Where to send requests and with which bearer token; ``source`` says where the token came from."""

    __slots__ = ("source", "token", "url")

    def __init__(self, url: str, token: str, source: str) -> None:
        self.url = url
        self.token = token
        self.source = source

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return (self.url, self.token, self.source) == (other.url, other.token, other.source)

    def __hash__(self) -> int:
        return hash((self.url, self.token, self.source))

    def __repr__(self) -> str:
        return f"Target(url={self.url!r}, token=<{len(self.token)} characters>, source={self.source!r})"


def token_path(start: str | None = None) -> str | None:
    """The local ``admin-token`` file (a path string), if there is one."""
    env_dir = os.environ.get("EVENTCOORD_DATA_DIR")
    if env_dir:
        candidate = os.path.join(env_dir, TOKEN_FILE)
        return candidate if os.path.isfile(candidate) else None
    folder = os.path.realpath(start or os.getcwd())
    while True:
        candidate = os.path.join(folder, DATA_DIR, TOKEN_FILE)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def token_file(start: Path | None = None) -> Path | None:
    """The local ``admin-token`` file, if there is one."""
    from pathlib import Path

    found = token_path(None if start is None else str(start))
    return None if found is None else Path(found)


def locate(url: str | None = None, token: str | None = None, start: Path | str | None = None) -> Target:
    """The server to talk to; an empty token means none was found (the server will answer 401)."""
    env = os.environ
    found_url = (url or env.get("EVENTCOORD_URL") or DEFAULT_URL).rstrip("/")
    if token:
        return Target(found_url, token, "--token")
    for name in ("EVENTCOORD_TOKEN", "EVENTCOORD_BOOTSTRAP_TOKEN"):
        if env.get(name):
            return Target(found_url, env[name], name)
    path = token_path(None if start is None else str(start))
    if path is not None:
        with open(path, encoding="utf-8") as f:
            return Target(found_url, f.read().strip(), path)
    return Target(found_url, "", "none")
