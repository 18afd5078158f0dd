"""An open event stream ends soon after its token is revoked, however the revocation was made:
by ``revoke_token`` on another replica, or by the operator's CLI writing to the database while
no server hears of it (docs/protocol.md#server-sent-events)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import httpx
import pytest
from tests.e2e.test_tokens import mint
from tests.helpers import Api, ServerProcess, run_cli

#: Generous: the contract is 2 s; the deadline only keeps a broken build from hanging.
DEADLINE = 30.0


class Reader:
    """One SSE stream read in the background: its lines, and whether it has ended."""

    def __init__(self, base_url: str, token: str) -> None:
        self.lines: list[str] = []
        self.status = 0
        self.opened = asyncio.Event()
        self.got_line = asyncio.Event()
        self._http = httpx.AsyncClient(base_url=base_url, headers={"authorization": f"Bearer {token}"}, timeout=None)
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async with self._http.stream("GET", "/v1/events/stream") as r:
            self.status = r.status_code
            self.opened.set()
            async for line in r.aiter_lines():
                self.lines.append(line)
                self.got_line.set()

    async def wait_for(self, text: str) -> None:
        async with asyncio.timeout(DEADLINE):
            while not any(text in line for line in self.lines):
                self.got_line.clear()
                await self.got_line.wait()

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await self.task
        await self._http.aclose()


async def _streams_end_on_revocation(
    admin: Api, readers_at: list[str], revoke: Callable[[str], object], checker_url: str
) -> None:
    token, token_id = await mint(admin, "agent")
    other, _ = await mint(admin, "agent")
    doomed = [Reader(url, token) for url in readers_at]
    kept = Reader(readers_at[0], other)
    try:
        for r in (*doomed, kept):
            async with asyncio.timeout(DEADLINE):
                await r.opened.wait()
            assert r.status == 200
        await admin.register(actor="before")  # every stream delivers while its token is good
        for r in (*doomed, kept):
            await r.wait_for('"actor_key":"before"')
        result = revoke(token_id)
        if asyncio.iscoroutine(result):
            await result
        for r in doomed:  # it ends by itself: no client timeout, no server restart
            async with asyncio.timeout(DEADLINE):
                await r.task
            assert [line for line in r.lines if line][-1] == ": token revoked", r.lines[-3:]
        # The stream of another token goes on, and the revoked token cannot come back.
        await admin.register(actor="after")
        await kept.wait_for('"actor_key":"after"')
        assert not kept.task.done()
        for url in {*readers_at, checker_url}:
            again = httpx.get(url + "/v1/events/stream", headers={"authorization": f"Bearer {token}"}, timeout=10)
            assert again.status_code == 401
    finally:
        for r in (*doomed, kept):
            await r.close()


async def test_a_stream_ends_when_the_operator_revokes_its_token_in_the_database(
    db_url: str, server: ServerProcess, api: Api
) -> None:
    def revoke(token_id: str) -> None:
        done = run_cli("token", "revoke", token_id, "--db", db_url)
        assert done.returncode == 0, done.stderr

    await _streams_end_on_revocation(api, [server.base_url], revoke, server.base_url)


@pytest.mark.postgres
async def test_streams_on_every_replica_end_when_another_replica_revokes(
    start_server: Callable[..., ServerProcess],
) -> None:
    a, b = start_server(), start_server()
    admin_b = Api(b.base_url)
    try:

        async def revoke(token_id: str) -> None:
            await admin_b.ok({"type": "revoke_token", "token_id": token_id})

        await _streams_end_on_revocation(admin_b, [a.base_url, b.base_url], revoke, b.base_url)
    finally:
        await admin_b.close()
