"""Shared fixtures: real backends (SQLite files, the real PostgreSQL), real server processes.

Every store-backed test runs once per backend. PostgreSQL comes from
``EVENTCOORD_TEST_PG_URL`` (a server URL; each test gets a fresh database cloned from a
migrated template). Without it the PostgreSQL half is skipped — except in CI
(``CI=true``), where a missing PostgreSQL fails the run instead.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

PG_URL = os.environ.get("EVENTCOORD_TEST_PG_URL", "")
IN_CI = os.environ.get("CI", "").lower() == "true"
BOOTSTRAP = "test-bootstrap-token"
BACKENDS = ["sqlite", "postgresql"]


def _pg_admin_url() -> str:
    """``postgresql://user@host:port/db`` for psql-style admin statements via asyncpg."""
    return PG_URL.replace("postgresql+asyncpg://", "postgresql://")


async def _pg_exec(*statements: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(_pg_admin_url())
    try:
        for s in statements:
            await conn.execute(s)
    finally:
        await conn.close()


def _db_url_for(name: str) -> str:
    base = PG_URL if PG_URL.startswith("postgresql+asyncpg://") else PG_URL.replace("postgresql://", "postgresql+asyncpg://")
    return base.rsplit("/", 1)[0] + "/" + name


_TEMPLATE: list[str] = []


def _pg_template() -> str:
    """A migrated template database, made once per test run."""
    if not _TEMPLATE:
        from eventcoord.store import open_store

        name = f"ec_tmpl_{uuid.uuid4().hex[:10]}"

        async def make() -> None:
            await _pg_exec(f'CREATE DATABASE "{name}"')
            store = open_store(_db_url_for(name))
            await store.migrate()

        asyncio.run(make())
        _TEMPLATE.append(name)
    return _TEMPLATE[0]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _TEMPLATE and PG_URL:
        asyncio.run(_pg_exec(f'DROP DATABASE IF EXISTS "{_TEMPLATE[0]}" WITH (FORCE)'))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test; PostgreSQL must not be skipped in CI."""
    name: str = request.param
    if name == "postgresql" and not PG_URL:
        if IN_CI:
            pytest.fail("CI=true but EVENTCOORD_TEST_PG_URL is not set: the PostgreSQL half must run in CI")
        pytest.skip("EVENTCOORD_TEST_PG_URL not set")
    return name


@pytest.fixture
def db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A fresh, migrated (PostgreSQL) or empty (SQLite) database for one test."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path}/eventcoord.db"
        return
    name = f"ec_t_{uuid.uuid4().hex[:12]}"
    asyncio.run(_pg_exec(f'CREATE DATABASE "{name}" TEMPLATE "{_pg_template()}"'))
    try:
        yield _db_url_for(name)
    finally:
        asyncio.run(_pg_exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Any]:
    """A started, migrated event store on the backend under test."""
    from eventcoord.store import open_store

    s = open_store(db_url)
    await s.start()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A real ``eventcoord serve`` process."""

    def __init__(self, db_url: str, data_dir: Path, ttl_seconds: int | None = None, nats: str = "off", extra_env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "eventcoord.cli", "serve", "--db", db_url, "--data-dir", str(data_dir), "--nats", nats, "--port", str(self.port)]
        if ttl_seconds is not None:
            args += ["--ttl-seconds", str(ttl_seconds)]
        env = {**os.environ, "EVENTCOORD_BOOTSTRAP_TOKEN": BOOTSTRAP, **(extra_env or {})}
        self.log_path = data_dir / f"server-{self.port}.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(args, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

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
            time.sleep(0.1)
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


@pytest.fixture
def start_server(db_url: str, tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start real server processes on the test's database; all are stopped afterwards."""
    started: list[ServerProcess] = []

    def start(**kwargs: Any) -> ServerProcess:
        s = ServerProcess(db_url, tmp_path / f"data{len(started)}", **kwargs)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def server(start_server: Callable[..., ServerProcess]) -> ServerProcess:
    """One real server on the backend under test, bootstrap token accepted."""
    return start_server()


class Api:
    """A thin async client of one server, authenticated with one token."""

    def __init__(self, base_url: str, token: str = BOOTSTRAP) -> None:
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

    async def events(self, *types: str) -> list[dict[str, Any]]:
        """The whole log of this token's workspace (optionally only some event types)."""
        out: list[dict[str, Any]] = []
        after = 0
        while True:
            page = (await self.get("/v1/events", after=after, limit=1000))["events"]
            if not page:
                return [e for e in out if not types or e["type"] in types]
            out.extend(page)
            after = page[-1]["position"]

    async def register(self, **fields: Any) -> str:
        result = await self.ok({"type": "register_agent", **fields})
        sid: str = result["session_id"]
        return sid

    async def close(self) -> None:
        await self.http.aclose()


@pytest.fixture
async def api(server: ServerProcess) -> AsyncIterator[Api]:
    """A client of the test's server with the bootstrap (admin) token."""
    a = Api(server.base_url)
    yield a
    await a.close()
