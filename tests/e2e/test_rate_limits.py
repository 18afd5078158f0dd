"""Rate limits over real HTTP: per token, per client address before authentication, bad tokens."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
import pytest
from tests.helpers import BOOTSTRAP, Api, ServerProcess

from eventcoord.config import ConfigError, from_env

pytestmark = pytest.mark.sqlite  # in-process admission control: the store plays no part

OFF = {
    "EVENTCOORD_RATE_TOKEN_PER_SECOND": "0",
    "EVENTCOORD_RATE_ADDRESS_PER_SECOND": "0",
    "EVENTCOORD_RATE_AUTH_FAILURES_PER_SECOND": "0",
}


def assert_limited(r: httpx.Response, scope: str) -> int:
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["ok"] is False and body["error"]["code"] == "RATE_LIMITED"
    assert body["error"]["details"]["scope"] == scope
    retry = int(r.headers["retry-after"])
    assert retry >= 1 and body["error"]["details"]["retry_after"] <= retry
    return retry


async def test_each_token_has_its_own_limit_and_it_refills(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server(
        extra_env={**OFF, "EVENTCOORD_RATE_TOKEN_PER_SECOND": "1", "EVENTCOORD_RATE_TOKEN_BURST": "4"}
    )
    api = Api(server.base_url)
    try:
        sid = await api.register(actor="a")  # 1
        other = await api.client("agent")  # 2: issue_token
        for _ in range(2):  # 3, 4
            await api.ok({"type": "heartbeat_agent", "session_id": sid})
        retry = assert_limited(await api.command({"type": "heartbeat_agent", "session_id": sid}), "token")
        assert_limited(await api.http.get("/v1/leases"), "token")  # reads count too
        # Another token is not affected, and /health is never limited.
        assert (await other.http.get("/v1/leases")).status_code == 200
        assert (await api.http.get("/health")).status_code == 200
        # Nothing was appended by the refused command.
        assert [e["type"] for e in await other.events()].count("AgentHeartbeat") == 2
        await asyncio.sleep(retry)  # Retry-After is honest: after it, the token may go on
        await api.ok({"type": "heartbeat_agent", "session_id": sid})
        await other.close()
    finally:
        await api.close()


async def test_one_address_is_limited_before_authentication(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server(
        extra_env={**OFF, "EVENTCOORD_RATE_ADDRESS_PER_SECOND": "0.5", "EVENTCOORD_RATE_ADDRESS_BURST": "3"}
    )
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        answers = [
            await http.get("/v1/leases", headers={"authorization": f"Bearer {t}"})
            for t in (BOOTSTRAP, "nope", BOOTSTRAP)
        ]
        assert [r.status_code for r in answers] == [200, 401, 200]
        # Whatever the token (or none), this address has spent its burst.
        for headers in ({"authorization": f"Bearer {BOOTSTRAP}"}, {"authorization": "Bearer other"}, {}):
            assert_limited(await http.get("/v1/leases", headers=headers), "address")
        assert (await http.get("/health")).status_code == 200


async def test_repeated_bad_tokens_are_slowed_down(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server(
        extra_env={**OFF, "EVENTCOORD_RATE_AUTH_FAILURES_PER_SECOND": "0.2", "EVENTCOORD_RATE_AUTH_FAILURES_BURST": "3"}
    )
    api = Api(server.base_url)
    try:
        await api.get("/v1/leases")  # the bootstrap token is now known good here
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            guesses = [await http.get("/v1/leases", headers={"authorization": f"Bearer guess-{i}"}) for i in range(3)]
            assert [r.status_code for r in guesses] == [401, 401, 401]
            # The fourth guess is not even looked at; neither is a request with no token.
            retry = assert_limited(
                await http.get("/v1/leases", headers={"authorization": "Bearer guess-3"}), "auth_failures"
            )
            assert retry >= 4  # one failure refills in 5 s at 0.2/s
            assert_limited(await http.post("/v1/commands", json={"type": "register_agent"}), "auth_failures")
        # A token that authenticated before keeps working from the same address.
        await api.ok({"type": "register_agent", "actor": "still-fine"})
    finally:
        await api.close()


def spellings(token: str) -> list[str]:
    """One token, written as clients and attackers write it: one key for the limiter."""
    return [
        f"Bearer {token}",
        f"bearer {token}",
        f"BEARER {token}",
        f"bEaReR {token}",
        f"Bearer   {token}",
        f"Bearer\t{token}",
        f"bearer \t {token}",
    ]


async def test_the_token_limit_sees_through_spelling(start_server: Callable[..., ServerProcess]) -> None:
    rate, burst = 0.01, 5  # one more every 100 s: the burst is all a token gets during the test
    server = start_server(
        extra_env={
            **OFF,
            "EVENTCOORD_RATE_TOKEN_PER_SECOND": str(rate),
            "EVENTCOORD_RATE_TOKEN_BURST": str(burst),
        }
    )
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        answers = [
            await http.get("/v1/leases", headers={"authorization": header})
            for _ in range(6)
            for header in spellings(BOOTSTRAP)
        ]
    refill = int((time.monotonic() - started) * rate)
    statuses = [r.status_code for r in answers]
    assert statuses.count(200) == burst + refill, statuses
    assert statuses.count(429) == len(answers) - burst - refill
    for r in answers:
        if r.status_code == 429:
            assert_limited(r, "token")


async def test_a_route_that_needs_no_token_vouches_for_none(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server(
        extra_env={
            **OFF,
            "EVENTCOORD_RATE_AUTH_FAILURES_PER_SECOND": "0.01",
            "EVENTCOORD_RATE_AUTH_FAILURES_BURST": "3",
        }
    )
    api = Api(server.base_url)
    try:
        unused = await api.token("agent")  # valid, but never authenticated on its own: only /ui sees it
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            assert (await http.get("/ui", headers={"authorization": f"Bearer {unused}"})).status_code == 200
            statuses = []
            for i in range(12):
                guess = {"authorization": f"Bearer guess-{i}"}
                ui = await http.get("/ui", headers=guess)  # needs no token: answers whatever it carries
                assert ui.status_code in (200, 429), ui.text
                r = await http.get("/v1/leases", headers=guess)
                statuses.append(r.status_code)
                if r.status_code == 429:
                    assert_limited(r, "auth_failures")
            # Three failures spend the brake's burst; every later guess is braked, /ui or not.
            assert statuses[:3] == [401, 401, 401], statuses
            assert set(statuses[3:]) == {429}, statuses
            # /ui vouched for no token: one that never authenticated waits like a guess ...
            assert_limited(await http.get("/v1/leases", headers={"authorization": f"Bearer {unused}"}), "auth_failures")
            # ... and one authentication accepted passes, however it is spelled.
            for header in spellings(BOOTSTRAP):
                assert (await http.get("/v1/leases", headers={"authorization": header})).status_code == 200
    finally:
        await api.close()


async def test_default_limits_let_a_normal_burst_through(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server()
    api = Api(server.base_url)
    try:
        sid = await api.register(actor="busy")
        answers = await asyncio.gather(
            *(api.command({"type": "heartbeat_agent", "session_id": sid}) for _ in range(300))
        )
        assert {r.status_code for r in answers} == {200}
    finally:
        await api.close()


def test_limits_are_configured_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTCOORD_RATE_TOKEN_PER_SECOND", "5")
    monkeypatch.setenv("EVENTCOORD_RATE_TOKEN_BURST", "10")
    s = from_env()
    assert (s.rate_token_per_second, s.rate_token_burst, s.rate_address_per_second) == (5.0, 10.0, 1000.0)
    monkeypatch.setenv("EVENTCOORD_RATE_LIMITS", "off")
    s = from_env()
    assert s.rate_token_per_second == s.rate_address_per_second == s.rate_auth_failures_per_second == 0
    monkeypatch.delenv("EVENTCOORD_RATE_LIMITS")
    monkeypatch.setenv("EVENTCOORD_RATE_TOKEN_BURST", "0")
    with pytest.raises(ConfigError, match="EVENTCOORD_RATE_TOKEN_BURST"):
        from_env()
    monkeypatch.setenv("EVENTCOORD_RATE_TOKEN_BURST", "lots")
    with pytest.raises(ConfigError, match="EVENTCOORD_RATE_TOKEN_BURST"):
        from_env()
