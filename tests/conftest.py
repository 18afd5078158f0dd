"""Shared fixtures: real backends (SQLite files, the real PostgreSQL), real server processes.

Every store-backed test (one that uses ``backend``, ``db_url``, ``store`` or a server)
runs once per backend; a test marked ``@pytest.mark.postgres`` runs on PostgreSQL only
(``sqlite``: on SQLite only), and every PostgreSQL run carries the ``postgres`` marker (``-m "not postgres"`` runs the
SQLite half). PostgreSQL comes from ``EVENTCOORD_TEST_PG_URL`` (a server URL; each test
gets a fresh database cloned from a migrated template). Without it the PostgreSQL half is
skipped — except in CI (``CI=true``), where a missing PostgreSQL fails the run instead.
Helpers that tests import live in ``tests/helpers.py``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import IN_CI, PG_URL, Api, ServerProcess

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
    base = (
        PG_URL
        if PG_URL.startswith("postgresql+asyncpg://")
        else PG_URL.replace("postgresql://", "postgresql+asyncpg://")
    )
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


def pytest_configure(config: pytest.Config) -> None:
    """The processes the tests start (servers, CLIs) cache their bytecode, outside the checkout.

    With ``PYTHONDONTWRITEBYTECODE`` set, each of the hundreds of ``eventcoord`` processes
    of a run compiled the package anew (a sixth of a server's start-up CPU); a cache beside the
    checkout keeps it clean and is shared by every process of the run.
    """
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), f"eventcoord-pycache-{os.getuid()}")
        del os.environ["PYTHONDONTWRITEBYTECODE"]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _TEMPLATE and PG_URL:
        asyncio.run(_pg_exec(f'DROP DATABASE IF EXISTS "{_TEMPLATE[0]}" WITH (FORCE)'))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run a store-backed test on both backends, or on the one its marker names."""
    if "backend" not in metafunc.fixturenames:
        return
    only = [
        name
        for name, marker in (("postgresql", "postgres"), ("sqlite", "sqlite"))
        if metafunc.definition.get_closest_marker(marker)
    ]
    names = only or BACKENDS
    params = [pytest.param(name, marks=pytest.mark.postgres) if name == "postgresql" else name for name in names]
    metafunc.parametrize("backend", params, indirect=True)


@pytest.fixture(autouse=True)
def _test_clock_as_the_environment_says() -> Iterator[None]:
    """A test that turned the test clock on in this process leaves it as it found it."""
    yield
    dbclock = sys.modules.get("eventcoord.store.dbclock")
    if dbclock is not None:
        dbclock.enable_test_clock(None)


@pytest.fixture
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


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head, made once per test worker (as PostgreSQL's template)."""
    from eventcoord.store import open_store

    path = tmp_path_factory.mktemp("sqlite-template") / "eventcoord.db"

    async def make() -> None:
        store = open_store(f"sqlite+aiosqlite:///{path}")
        await store.start()
        try:
            await store.migrate()
        finally:
            await store.close()

    asyncio.run(make())
    with sqlite3.connect(path) as conn:  # everything in the one file that is copied
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def from_template(db_url: str, template: Path) -> None:
    """Give a SQLite ``db_url`` that does not exist yet a copy of the migrated template.

    Migrating a new file runs every revision (a fifth of a second of CPU, in each server);
    the copy is what that migration makes. ``db_url`` itself starts empty, so a test that
    migrates or serves a new file (``eventcoord migrate``, the wheel's server) still does.
    """
    prefix = "sqlite+aiosqlite:///"
    if db_url.startswith(prefix) and not os.path.exists(db_url[len(prefix) :]):
        shutil.copyfile(template, db_url[len(prefix) :])


@pytest.fixture
async def store(db_url: str, sqlite_template: Path) -> AsyncIterator[Any]:
    """A started, migrated event store on the backend under test."""
    from eventcoord.store import open_store

    from_template(db_url, sqlite_template)
    s = open_store(db_url)
    await s.start()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def start_server(db_url: str, tmp_path: Path, sqlite_template: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start real server processes on the test's database (a new SQLite file: a copy of the
    migrated template); all are stopped afterwards."""
    started: list[ServerProcess] = []

    def start(**kwargs: Any) -> ServerProcess:
        from_template(db_url, sqlite_template)
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


@pytest.fixture
async def api(server: ServerProcess) -> AsyncIterator[Api]:
    """A client of the test's server with the bootstrap (admin) token."""
    a = Api(server.base_url)
    yield a
    await a.close()
