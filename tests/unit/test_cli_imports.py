"""What the command line loads, so its start-up cannot silently grow: the harness hook (run at every
tool call of a coding agent) loads only the standard library's socket and a handful of our own
modules; a CLI read loads neither the server nor msgspec nor a terminal library.

A structural test, not a timed one: each command runs in a fresh interpreter with ``-X importtime``
against a stand-in HTTP server on loopback, and the modules it imported beyond the bare
interpreter's are compared with what it may load.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eventcoord.cli.harness_hook import CLAIMING_TOOLS

#: The modules of eventcoord the hook command may load: nothing else of the package.
HOOK_MODULES = {
    "eventcoord",
    "eventcoord.cli",
    "eventcoord.cli.harness_hook",
    "eventcoord.client",
    "eventcoord.client.locate",
    "eventcoord.client.oneshot",
}
#: Too costly for a command run at every tool call (each costs milliseconds to import).
HEAVY_FOR_A_HOOK = {
    "argparse",
    "asyncio",
    "dataclasses",
    "email",
    "http.client",
    "httpx",
    "inspect",
    "json",
    "litestar",
    "msgspec",
    "pathlib",
    "rich",
    "socket",
    "sqlalchemy",
    "ssl",
    "subprocess",
    "typing",
    "urllib.request",
}
#: What a CLI read must not load: the server's stack, the typed client, the terminal library.
HEAVY_FOR_A_READ = {
    "alembic",
    "asyncio",
    "eventcoord.api",
    "eventcoord.client.operations",
    "eventcoord.client.sync",
    "eventcoord.codec",
    "eventcoord.commands",
    "eventcoord.store",
    "http.client",
    "httpx",
    "litestar",
    "msgspec",
    "rich",
    "sqlalchemy",
    "uvicorn",
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self._answer(b"{}")

    def do_GET(self) -> None:
        lease = {"issue": "P-1", "project": "P", "session_id": "s-1", "actor_key": "a", "fencing_token": 1}
        self._answer(json.dumps({"leases": [{**lease, "live": True}]}).encode())

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def imported(argv: list[str], stdin: bytes = b"") -> tuple[set[str], subprocess.CompletedProcess[bytes]]:
    """The modules a fresh interpreter imports running ``eventcoord`` with ``argv``, beyond ``-c pass``."""

    def modules(code: str) -> tuple[set[str], subprocess.CompletedProcess[bytes]]:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code], input=stdin, capture_output=True, timeout=60
        )
        names = {
            line.rsplit("|", 1)[1].strip()
            for line in done.stderr.decode().splitlines()
            if line.startswith("import time:") and "|" in line
        }
        return names, done

    baseline, _ = modules("pass")
    names, done = modules(f"import sys; from eventcoord.cli import main; sys.exit(main({argv!r}))")
    return names - baseline, done


def below(names: set[str], roots: set[str]) -> set[str]:
    return {n for n in names if n in roots or any(n.startswith(r + ".") for r in roots)}


def test_the_hook_command_loads_only_the_standard_librarys_socket(url: str) -> None:
    stdin = b'{"session_id": "s", "cwd": "/r", "hook_event_name": "PreToolUse", "tool_name": "Write"}'
    names, done = imported(["hook", "claude", "--url", url, "--token", "t"], stdin)
    assert (done.returncode, done.stdout) == (0, b"{}"), done.stderr[-2000:]
    assert below(names, {"eventcoord"}) == HOOK_MODULES
    assert below(names, HEAVY_FOR_A_HOOK) == set()


def test_the_hook_command_fails_open_without_loading_more(url: str) -> None:
    names, done = imported(["hook", "codex", "--url", "http://127.0.0.1:9", "--token", "t"], b"{}")
    assert done.returncode == 0 and done.stdout == b""
    assert below(names, {"eventcoord"}) == HOOK_MODULES
    assert below(names, HEAVY_FOR_A_HOOK - {"json"}) == set()  # json: only to read a refusal's code


def test_a_read_loads_neither_the_server_nor_msgspec_nor_rich(url: str) -> None:
    names, done = imported(["leases", "--url", url, "--token", "t"])
    assert done.returncode == 0 and b"P-1" in done.stdout, done.stderr[-2000:]
    assert below(names, HEAVY_FOR_A_READ) == set()


def test_fail_closed_knows_the_tools_the_route_claims_for() -> None:
    from eventcoord.harness.edits import PATCH_TOOLS, PATH_FIELDS

    assert set(PATH_FIELDS) | set(PATCH_TOOLS) == CLAIMING_TOOLS
