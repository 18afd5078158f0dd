"""First run (docs/protocol.md#clients): ``serve`` without a bootstrap token mints an admin token into the data
folder, and the README's "Try it" works as written with no token pasted."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
from mcp import Client, StdioServerParameters
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTCOORD_")}
    return {**env, **extra}


def shell_block(doc: Path, name: str) -> str:
    """The fenced shell block that follows ``<!-- tested: name -->`` in ``doc``."""
    m = re.search(rf"<!-- tested: {re.escape(name)} -->\s*```sh\n(.*?)```", doc.read_text(), re.S)
    assert m, f"{doc} has no block {name!r}"
    return m.group(1)


class Serve:
    """``eventcoord serve`` (or any command line that runs it), its output kept."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, port: int, log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120  # the first `dev.py serve` may install the project
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, log.read_text()
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError(log.read_text())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


def serve(db_url: str, cwd: Path, port: int) -> Serve:
    argv = [sys.executable, "-m", "eventcoord.cli", "serve", "--db", db_url, "--nats", "off", "--port", str(port)]
    return Serve(argv, clean_env(), cwd, port, cwd / "serve.log")


async def test_serve_mints_the_admin_token_once_and_every_client_finds_it(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    first = serve(db_url, tmp_path, port)
    try:
        token_file = tmp_path / ".eventcoord" / "admin-token"
        token = token_file.read_text().strip()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        printed = (tmp_path / "serve.log").read_text()
        assert str(token_file) in printed and token not in printed
        assert httpx.get(first.url + "/v1/agents", headers={"authorization": f"Bearer {token}"}).status_code == 200
    finally:
        first.stop()

    again = serve(db_url, tmp_path, port)
    try:
        assert token_file.read_text().strip() == token  # reused, not replaced
        # The CLI from this folder: only the URL differs from the default, no token given.
        env = clean_env(EVENTCOORD_URL=again.url)
        done = subprocess.run(
            [sys.executable, "-m", "eventcoord.cli", "register-agent", "--actor", "cli", "--print", "session_id"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0 and done.stdout.startswith("s-"), done.stderr
        # The MCP server from this folder finds the same token.
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "eventcoord.cli", "mcp"],
            env={"EVENTCOORD_URL": again.url},
            cwd=tmp_path,
        )
        async with Client(params) as client:
            r = await client.call_tool("list_agents", {})
            assert not r.is_error and isinstance(r.structured_content, dict)
            assert [a["actor_key"] for a in r.structured_content["agents"]] == ["cli"]
    finally:
        again.stop()


def test_with_a_bootstrap_token_no_file_is_written(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "eventcoord.cli", "serve", "--db", db_url, "--nats", "off", "--port", str(port)]
    s = Serve(argv, clean_env(EVENTCOORD_BOOTSTRAP_TOKEN="boot"), tmp_path, port, tmp_path / "serve.log")
    s.stop()
    assert not (tmp_path / ".eventcoord" / "admin-token").exists()


def test_the_readme_try_it_works_as_written(db_url: str, tmp_path: Path) -> None:
    block = shell_block(ROOT / "README.md", "try-it")
    first, rest = block.split("\n", 1)
    assert first.startswith("python3 dev.py serve &")
    # Run beside other checkouts: a free port and a private data folder instead of the defaults.
    port, data = free_port(), tmp_path / "data"
    rest = rest.replace("127.0.0.1:8765", f"127.0.0.1:{port}").replace(".eventcoord/", f"{data}/")
    env = clean_env(
        EVENTCOORD_PORT=str(port),
        EVENTCOORD_DATA_DIR=str(data),
        EVENTCOORD_DB_URL=db_url,
        EVENTCOORD_URL=f"http://127.0.0.1:{port}",
    )
    server = Serve(["python3", "dev.py", "serve"], env, ROOT, port, tmp_path / "serve.log")
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", rest], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "ok to push" in done.stdout
        assert "P-1" in done.stdout and "AgentEnded" in done.stdout
        assert done.stdout.rstrip().endswith('{"leases":[]}')  # ended: nothing held
        assert str(data / "admin-token") in (tmp_path / "serve.log").read_text()
    finally:
        server.stop()
