"""What the tests share: real server processes, an HTTP client of one, the CLI, waiting.

Fixtures live in ``conftest.py``; everything a test module imports lives here, so a
helper is written once (``from tests.helpers import Api, ServerProcess``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
from tests import fork_server
from tests.fork_server import ForkedProcess

PG_URL = os.environ.get("EVENTCOORD_TEST_PG_URL", "")
IN_CI = os.environ.get("CI", "").lower() == "true"
BOOTSTRAP = "test-bootstrap-token"
ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``eventcoord`` script (the console entry point).

    The environment is this one without any ``EVENTCOORD_*`` variable, plus ``env``.
    """
    script = Path(sys.executable).with_name("eventcoord")
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "eventcoord.cli"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EVENTCOORD_")}
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=timeout, env={**clean, **(env or {})}, cwd=cwd
    )


async def wait_until(cond: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> None:
    """Poll ``cond`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def advance_clock(db_url: str, seconds: float) -> None:
    """Move the test clock of the database at ``db_url`` ``seconds`` forward: servers on it
    started with ``test_clock=True`` see it at their next decision or read (no waiting)."""
    from eventcoord.store import dbclock, open_store

    store = open_store(db_url)
    await store.start()
    try:
        await store.transact(lambda conn: dbclock.advance(conn, seconds))
    finally:
        await store.close()


class ServerProcess:
    """A real ``eventcoord serve`` process."""

    def __init__(
        self,
        db_url: str,
        data_dir: Path,
        ttl_seconds: int | None = None,
        nats: str = "off",
        extra_env: dict[str, str] | None = None,
        argv: list[str] | None = None,
        port: int | None = None,
        test_clock: bool = False,
    ) -> None:
        self.port = port if port is not None else free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        command = argv or [sys.executable, "-m", "eventcoord.cli"]
        args = [
            *command,
            "serve",
            "--db",
            db_url,
            "--data-dir",
            str(data_dir),
            "--nats",
            nats,
            "--port",
            str(self.port),
        ]
        if ttl_seconds is not None:
            args += ["--ttl-seconds", str(ttl_seconds)]
        env = {**os.environ, "EVENTCOORD_BOOTSTRAP_TOKEN": BOOTSTRAP, **(extra_env or {})}
        if test_clock:  # the database clock moves when the test says (advance_clock), and with time
            env["EVENTCOORD_TEST_CLOCK"] = "1"
        self.log_path = data_dir / f"server-{self.port}.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc: subprocess.Popen[bytes] | ForkedProcess
        if argv is None and fork_server.enabled():
            self.proc = fork_server.PARENT.spawn(args[3:], env, self.log_path)
        else:
            self.proc = subprocess.Popen(args, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:  # nobody else can stop it: no test holds it yet
            self.stop()
            raise

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_path.read_text()}")
            try:
                if httpx.get(self.base_url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"server not ready:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._log.close()


class Api:
    """A thin async client of one server, authenticated with one token."""

    def __init__(self, base_url: str, token: str = BOOTSTRAP) -> None:
        self.base_url = base_url
        self.http = httpx.AsyncClient(base_url=base_url, headers={"authorization": f"Bearer {token}"}, timeout=30.0)

    async def command(self, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post("/v1/commands", json=body)

    async def ok(self, body: dict[str, Any]) -> dict[str, Any]:
        """Send a command that must succeed; return its result."""
        r = await self.command(body)
        assert r.status_code == 200, r.text
        payload: dict[str, Any] = r.json()
        assert payload["ok"] is True
        return payload["result"] if payload["result"] is not None else {}

    async def error(self, body: dict[str, Any], status: int, code: str) -> dict[str, Any]:
        """Send a command that must fail with ``code``; return the error member."""
        r = await self.command(body)
        assert r.status_code == status, r.text
        err: dict[str, Any] = r.json()["error"]
        assert err["code"] == code, r.text
        return err

    async def get(self, path: str, **params: Any) -> dict[str, Any]:
        r = await self.http.get(path, params=params)
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body

    async def events(self, *types: str, after: int = 0) -> list[dict[str, Any]]:
        """The log of this token's workspace after ``after`` (optionally only some types)."""
        out: list[dict[str, Any]] = []
        while True:
            page = (await self.get("/v1/events", after=after, limit=1000))["events"]
            if not page:
                return [e for e in out if not types or e["type"] in types]
            out.extend(page)
            after = page[-1]["position"]

    async def head(self) -> int:
        """The newest committed position, as ``/health`` reports it."""
        r = await self.http.get("/health")
        assert r.status_code == 200, r.text
        value: int = r.json()["head"]
        return value

    async def agents(self, **params: Any) -> dict[str, dict[str, Any]]:
        """``GET /v1/agents`` by session id."""
        return {a["session_id"]: a for a in (await self.get("/v1/agents", **params))["agents"]}

    async def register(self, **fields: Any) -> str:
        result = await self.ok({"type": "register_agent", **fields})
        sid: str = result["session_id"]
        return sid

    async def token(self, role: str, workspace: str | None = None) -> str:
        """A new token of ``role`` (in ``workspace``, or this token's), minted by this one."""
        body: dict[str, Any] = {"type": "issue_token", "role": role}
        if workspace is not None:
            body["workspace"] = workspace
        token: str = (await self.ok(body))["token"]
        return token

    async def client(self, role: str, workspace: str | None = None, base_url: str | None = None) -> Api:
        """A client of this server (or ``base_url``) with a new token of ``role``."""
        return Api(base_url or self.base_url, await self.token(role, workspace))

    async def close(self) -> None:
        await self.http.aclose()


class TcpProxy:
    """A real TCP forwarder on loopback between a client (a server process) and ``target``.

    ``cut()`` resets every connection through it and refuses new ones (as a stopped
    database does); ``restore()`` accepts again on the same port.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        import threading

        self.target = (target_host, target_port)
        self.port = free_port()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.restore()

    def restore(self) -> None:
        """Listen (again) on the proxy's port."""
        import threading

        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        t = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        t.start()
        self._threads.append(t)

    def _accept(self, listener: socket.socket) -> None:
        import threading

        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut: the listener was closed
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Refuse new connections and reset every open one."""
        import struct

        if self._listener is not None:
            # shutdown wakes the accept() blocked in the other thread (close alone does not)
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:  # RST, not FIN: the peer sees the connection reset at once
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def url(self, db_url: str) -> str:
        """``db_url`` with its host and port replaced by the proxy's."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(db_url)
        user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{self.port}"))

    def close(self) -> None:
        self.cut()
