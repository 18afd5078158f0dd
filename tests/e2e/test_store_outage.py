"""PostgreSQL unreachable: every route answers 503 STORE_UNAVAILABLE with Retry-After and
/health 503 naming the cause; once it is back, the same server answers again, no restart.

Cut by a real TCP proxy between the server and the real PostgreSQL; refused by PostgreSQL
itself (``ALLOW_CONNECTIONS false``, a role's connection limit), with one line in the log
per outage and no traceback; restarted (a private cluster), after which no request fails
on a pooled connection the restart killed.
"""

from __future__ import annotations

import asyncio
import collections
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest
from tests.helpers import Api, ServerProcess, TcpProxy, wait_until
from tests.topology import PrivatePostgres

pytestmark = pytest.mark.postgres

READS = [
    "/v1/agents",
    "/v1/agents/s-1",
    "/v1/leases",
    "/v1/file-claims",
    "/v1/conflicts",
    "/v1/heatmap",
    "/v1/queue",
    "/v1/messages?channel=issue:I-1",
    "/v1/events",
    "/v1/named-leases",
    "/v1/issues/I-1/state",
]


def assert_unavailable(r: httpx.Response, what: str) -> None:
    assert r.status_code == 503, (what, r.status_code, r.text)
    assert r.headers.get("retry-after", "").isdigit(), (what, r.headers)
    assert r.json()["error"]["code"] == "STORE_UNAVAILABLE", (what, r.text)


async def test_an_unreachable_database_is_503_then_recovers_without_restart(db_url: str, tmp_path: Path) -> None:
    target = urlsplit(db_url)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 5432)
    server = ServerProcess(proxy.url(db_url), tmp_path / "data")
    api = Api(server.base_url)
    try:
        agent = await api.client("agent")  # a token the server looks up in the database
        sid = await agent.register(actor="a")
        await agent.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "I-1"})

        proxy.cut()
        health = httpx.get(server.base_url + "/health", timeout=30)
        assert health.status_code == 503 and health.headers.get("retry-after", "").isdigit(), health.text
        assert health.json()["status"] == "unavailable" and "postgresql" in health.json()["cause"], health.text
        for path in READS:
            assert_unavailable(await api.http.get(path), path)
            assert_unavailable(await agent.http.get(path), path)
        commands: list[dict[str, Any]] = [
            {"type": "heartbeat_agent", "session_id": sid, "command_id": "hb-outage"},
            {"type": "release_issue", "session_id": sid, "issue": "I-1"},
            {"type": "register_agent", "actor": "b"},
        ]
        for body in commands:
            assert_unavailable(await api.command(body), body["type"])
            assert_unavailable(await agent.command(body), body["type"])
        stranger = Api(server.base_url, token=f"unknown-{uuid.uuid4().hex}")
        try:
            assert_unavailable(await stranger.http.get("/v1/leases"), "an uncached token")
        finally:
            await stranger.close()

        proxy.restore()
        await wait_until(
            lambda: httpx.get(server.base_url + "/health", timeout=30).status_code == 200, 60, "health 200 again"
        )
        # the same process serves reads and commands again; a retried command_id appends once
        await agent.ok({"type": "heartbeat_agent", "session_id": sid, "command_id": "hb-outage"})
        await agent.ok({"type": "heartbeat_agent", "session_id": sid, "command_id": "hb-outage"})
        await agent.ok({"type": "release_issue", "session_id": sid, "issue": "I-1"})
        assert (await api.get("/v1/leases"))["leases"] == []
        for path in READS:
            r = await agent.http.get(path)
            assert r.status_code in (200, 404), (path, r.text)
        beats = [e for e in await api.events("AgentHeartbeat") if e["metadata"].get("command_id") == "hb-outage"]
        assert len(beats) == 1
        await agent.close()
    finally:
        await api.close()
        server.stop()
        proxy.close()


# --- a database that refuses connections (it answers, but not to us) ---------------------


def _admin_url(db_url: str, database: str = "postgres") -> str:
    """An asyncpg URL of the same server as ``db_url``, for admin statements, as the superuser."""
    parts = urlsplit(db_url.replace("postgresql+asyncpg://", "postgresql://"))
    return f"postgresql://postgres@{parts.hostname}:{parts.port or 5432}/{database}"


async def _admin(db_url: str, *statements: str, database: str = "postgres") -> None:
    conn = await asyncpg.connect(_admin_url(db_url, database))
    try:
        for s in statements:
            await conn.execute(s)
    finally:
        await conn.close()


@pytest.fixture
async def limited_role(db_url: str) -> AsyncIterator[str]:
    """A login role (not a superuser: limits do not bind those) with every right on the test's database."""
    role = f"ec_r_{uuid.uuid4().hex[:10]}"
    database = urlsplit(db_url).path.lstrip("/")
    await _admin(db_url, f'CREATE ROLE "{role}" LOGIN', f'GRANT ALL ON DATABASE "{database}" TO "{role}"')
    await _admin(
        db_url,
        f'GRANT ALL ON SCHEMA public TO "{role}"',
        f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"',
        f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"',
        database=database,
    )
    try:
        yield role
    finally:
        await _admin(db_url, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
        await _admin(db_url, f'DROP OWNED BY "{role}"', database=database)
        await _admin(db_url, f'DROP ROLE IF EXISTS "{role}"')


def _as_role(db_url: str, role: str) -> str:
    parts = urlsplit(db_url)
    return f"postgresql+asyncpg://{role}@{parts.hostname}:{parts.port or 5432}{parts.path}"


def _refusals(server: ServerProcess) -> tuple[int, int]:
    """(tracebacks, outage lines) in the server's log so far."""
    text = server.log_path.read_text()
    return text.count("Traceback"), text.count("database unreachable")


async def _every_route_is_503_then_recovers(
    server: ServerProcess, api: Api, agent: Api, sid: str, refuse: list[str], allow: list[str], db_url: str
) -> None:
    await _admin(db_url, *refuse)
    health = httpx.get(server.base_url + "/health", timeout=30)
    assert health.status_code == 503 and health.headers.get("retry-after", "").isdigit(), health.text
    assert health.json()["error"]["code"] == "STORE_UNAVAILABLE", health.text
    assert health.json()["status"] == "unavailable" and "postgresql" in health.json()["cause"], health.text
    for _ in range(3):  # again and again: still a 503, and still one line in the log
        for path in READS:
            assert_unavailable(await api.http.get(path), path)
            assert_unavailable(await agent.http.get(path), path)
        for body in (
            {"type": "heartbeat_agent", "session_id": sid},
            {"type": "release_issue", "session_id": sid, "issue": "I-1"},
        ):
            assert_unavailable(await agent.command(body), body["type"])
    stranger = Api(server.base_url, token=f"unknown-{uuid.uuid4().hex}")
    try:
        assert_unavailable(await stranger.http.get("/v1/leases"), "an uncached token")
    finally:
        await stranger.close()
    write = _hook("PreToolUse", tool_name="Write", tool_input={"file_path": "/w/src/a.py", "content": "x"})
    assert_unavailable(await api.http.post("/v1/hooks/claude", json=write), "a hook (one statement)")

    await _admin(db_url, *allow)
    await wait_until(lambda: httpx.get(server.base_url + "/health", timeout=30).status_code == 200, 60, "health 200")
    await agent.ok({"type": "release_issue", "session_id": sid, "issue": "I-1"})
    for path in READS:
        r = await agent.http.get(path)
        assert r.status_code in (200, 404), (path, r.text)
    assert (await api.http.post("/v1/hooks/claude", json=write)).status_code == 200
    tracebacks, outages = _refusals(server)
    assert tracebacks == 0, server.log_path.read_text()[-4000:]
    assert outages == 1, server.log_path.read_text()[-4000:]


HARNESS_SESSION = "0c8f5d2e-1111-4000-8000-000000000001"


def _hook(event: str, **fields: Any) -> dict[str, Any]:
    """A Claude Code hook payload of one harness session."""
    return {"session_id": HARNESS_SESSION, "cwd": "/w", "hook_event_name": event, **fields}


async def _started(url: str, tmp_path: Path) -> tuple[ServerProcess, Api, Api, str]:
    server = ServerProcess(url, tmp_path / "data", extra_env={"EVENTCOORD_RATE_LIMITS": "off"})
    api = Api(server.base_url)
    agent = await api.client("agent")
    sid = await agent.register(actor="a")
    await agent.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "I-1"})
    started = await api.http.post("/v1/hooks/claude", json=_hook("SessionStart", source="startup"))
    assert started.status_code == 200, started.text  # a bound harness session: its hooks read in one statement
    return server, api, agent, sid


async def test_a_database_refusing_connections_is_503_everywhere_then_recovers(db_url: str, tmp_path: Path) -> None:
    """``ALLOW_CONNECTIONS false``: PostgreSQL answers, refusing; every route is 503, /health included."""
    database = urlsplit(db_url).path.lstrip("/")
    server, api, agent, sid = await _started(db_url, tmp_path)
    try:
        await _every_route_is_503_then_recovers(
            server,
            api,
            agent,
            sid,
            [
                f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false',
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'",
            ],
            [f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true'],
            db_url,
        )
    finally:
        await agent.close()
        await api.close()
        server.stop()
        await _admin(db_url, f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')


async def test_too_many_connections_is_503_everywhere_then_recovers(
    db_url: str, limited_role: str, tmp_path: Path
) -> None:
    """The server's role may open no more connections (``too many connections for role``)."""
    server, api, agent, sid = await _started(_as_role(db_url, limited_role), tmp_path)
    try:
        await _every_route_is_503_then_recovers(
            server,
            api,
            agent,
            sid,
            [
                f'ALTER ROLE "{limited_role}" CONNECTION LIMIT 0',
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{limited_role}'",
            ],
            [f'ALTER ROLE "{limited_role}" CONNECTION LIMIT -1'],
            db_url,
        )
    finally:
        await agent.close()
        await api.close()
        server.stop()


@pytest.mark.skipif(not PrivatePostgres.available(), reason="initdb/pg_ctl not usable here")
async def test_a_restart_under_load_is_503_then_no_request_fails_on_a_stale_connection(
    backend: str, tmp_path: Path
) -> None:
    """PostgreSQL restarted (``pg_ctl stop -m fast``, then started) twice on a private cluster.

    Under load, every answer is a 2xx, a refusal or 503 STORE_UNAVAILABLE (never 500, no
    traceback in the log). Restarted while the server idles, every pooled connection is dead:
    the first requests afterwards, many at once (each takes a pooled connection), and the
    first command all succeed.
    """
    pg = PrivatePostgres().init()
    pg.start()
    server: ServerProcess | None = None
    try:
        server, api, agent, sid = await _started(pg.url, tmp_path)
        reads = [p for p in READS for _ in range(3)]

        async def all_reads() -> list[int]:
            answers = await asyncio.gather(*(agent.http.get(p) for p in reads))
            return [r.status_code for r in answers]

        restarted = asyncio.Event()
        answers: list[tuple[int, str]] = []

        async def load(i: int) -> None:
            n = 0
            while not restarted.is_set():
                n += 1
                if n % 2:
                    r = await agent.http.get(READS[(i + n) % len(READS)])
                else:
                    body = {"type": "claim_issue", "session_id": sid, "project": "L", "issue": f"L-{i}-{n}"}
                    r = await agent.command(body)
                answers.append(
                    (r.status_code, r.json().get("error", {}).get("code", "") if r.status_code >= 400 else "")
                )

        def bounce() -> None:
            pg.stop()
            pg.start()

        async def restart() -> None:
            await wait_until(lambda: len(answers) >= 50, 30, "load before the restart")
            await asyncio.to_thread(bounce)
            await wait_until(lambda: answers[-1][0] < 500, 30, "answers after the restart")
            restarted.set()

        await asyncio.gather(restart(), *(load(i) for i in range(8)))
        assert {code for status, code in answers if status >= 500} <= {"STORE_UNAVAILABLE"}, answers
        print(f"restart under load: {collections.Counter(answers)}")
        assert "Traceback" not in server.log_path.read_text(), server.log_path.read_text()[-4000:]

        assert all(s in (200, 404) for s in await all_reads())  # the pool holds many connections now
        bounce()
        statuses = await all_reads()
        assert all(s in (200, 404) for s in statuses), statuses
        await agent.ok({"type": "heartbeat_agent", "session_id": sid})
        assert httpx.get(server.base_url + "/health", timeout=30).status_code == 200
        await agent.close()
        await api.close()
    finally:
        if server is not None:
            server.stop()
        pg.close()
