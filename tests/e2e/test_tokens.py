"""Tokens: revoke_token and token_id, effective on every replica within a second; the
``eventcoord token list/revoke`` CLI; sessions bound to the token that registered them
(docs/protocol.md#roles)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from tests.helpers import Api, ServerProcess, run_cli


async def mint(api: Api, role: str, workspace: str | None = None) -> tuple[str, str]:
    """A new token of ``role`` and its token_id."""
    body: dict[str, Any] = {"type": "issue_token", "role": role}
    if workspace is not None:
        body["workspace"] = workspace
    got = await api.ok(body)
    assert got["token_id"].startswith("tok_")
    return got["token"], got["token_id"]


def status_with(base_url: str, header: str) -> int:
    return httpx.get(base_url + "/v1/leases", headers={"authorization": header}, timeout=10).status_code


def spellings(token: str) -> list[str]:
    return [f"Bearer {token}", f"bearer {token}", f"BEARER {token}", f"Bearer   {token}"]


@pytest.mark.postgres
async def test_a_revoked_token_is_refused_by_every_replica_within_a_second(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    a, b = start_server(), start_server()
    admin = Api(a.base_url)
    try:
        token, token_id = await mint(admin, "agent")
        other, other_id = await mint(admin, "reader")
        # both replicas have looked the tokens up (and cached them), under every spelling
        for server in (a, b):
            for header in spellings(token) + spellings(other):
                assert status_with(server.base_url, header) == 200
        answer = await admin.ok({"type": "revoke_token", "token_id": token_id})
        assert answer["token_id"] == token_id and answer["revoked"] is True
        await asyncio.sleep(1.0)  # docs/protocol.md#roles: effective on every replica within one second
        for server in (a, b):
            for header in spellings(token):
                assert status_with(server.base_url, header) == 401, (server.base_url, header)
            assert status_with(server.base_url, f"Bearer {other}") == 200
        # the operator's CLI on the same store: list shows both, revoke cuts the other one
        listed = run_cli("token", "list", "--db", db_url, "--json")
        assert listed.returncode == 0, listed.stderr
        rows = {r["token_id"]: r for r in json.loads(listed.stdout)["tokens"]}
        assert rows[token_id]["revoked_at"] is not None and rows[other_id]["revoked_at"] is None
        assert token not in listed.stdout and other not in listed.stdout  # ids, never secrets
        revoked = run_cli("token", "revoke", other_id, "--db", db_url)
        assert revoked.returncode == 0, revoked.stderr
        await asyncio.sleep(1.0)
        for server in (a, b):
            assert status_with(server.base_url, f"Bearer {other}") == 401
        unknown = run_cli("token", "revoke", "tok_" + "0" * 24, "--db", db_url)
        assert unknown.returncode == 1 and unknown.stderr.startswith("NOT_FOUND")
    finally:
        await admin.close()


async def test_revoke_token_is_for_admins_of_the_tokens_workspace(api: Api, server: ServerProcess) -> None:
    _, agent_id = await mint(api, "agent")
    ws2_admin_token, _ = await mint(api, "admin", workspace="ws2")
    _, ws2_agent_id = await mint(api, "agent", workspace="ws2")
    for role in ("agent", "human", "reader"):
        token, _ = await mint(api, role)
        who = Api(server.base_url, token)
        try:
            await who.error({"type": "revoke_token", "token_id": agent_id}, 403, "FORBIDDEN")
        finally:
            await who.close()
    ws2 = Api(server.base_url, ws2_admin_token)
    try:
        await ws2.error({"type": "revoke_token", "token_id": agent_id}, 404, "NOT_FOUND")  # invisible
        await ws2.ok({"type": "revoke_token", "token_id": ws2_agent_id})
    finally:
        await ws2.close()
    await api.error({"type": "revoke_token", "token_id": "tok_" + "0" * 24}, 404, "NOT_FOUND")
    await api.error({"type": "revoke_token", "token_id": "not-an-id"}, 422, "VALIDATION")
    first = await api.command({"type": "revoke_token", "token_id": agent_id})
    again = await api.ok({"type": "revoke_token", "token_id": agent_id})
    assert first.json()["events"] == [] and again["already_revoked"] is True
    replay = await api.ok({"type": "issue_token", "role": "agent", "command_id": "mint-1"})
    replayed = await api.ok({"type": "issue_token", "role": "agent", "command_id": "mint-1"})
    assert replayed["token"] is None and replayed["token_id"] == replay["token_id"]


async def test_a_session_is_driven_only_by_the_token_that_registered_it(api: Api, server: ServerProcess) -> None:
    owner_token, _ = await mint(api, "agent")
    other_token, _ = await mint(api, "agent")
    human_token, _ = await mint(api, "human")
    owner, other, human = (Api(server.base_url, t) for t in (owner_token, other_token, human_token))
    try:
        sid = await owner.register(actor="owner")
        person = await human.register(actor="person", kind="human")
        await human.ok({"type": "claim_issue", "session_id": person, "project": "P", "issue": "H-1"})
        await api.ok({"type": "enqueue_work", "project": "P"})
        refused: list[dict[str, Any]] = [
            {"type": "heartbeat_agent", "session_id": sid},
            {"type": "claim_issue", "session_id": sid, "project": "P", "issue": "I-1"},
            {"type": "release_issue", "session_id": sid, "issue": "I-1"},
            {"type": "claim_files", "session_id": sid, "issue": "I-1", "paths": ["src/"]},
            {"type": "release_files", "session_id": sid, "issue": "I-1"},
            {"type": "post_message", "session_id": sid, "channel": "issue:I-1", "body": "hi"},
            {"type": "verify_hold", "session_id": sid, "issue": "I-1"},
            {"type": "claim_next_work", "session_id": sid, "project": "P"},
            {"type": "acquire_lease", "session_id": sid, "name": "leader"},
            {"type": "end_agent", "session_id": sid},
        ]
        for body in refused:
            err = await other.error(body, 403, "FORBIDDEN")
            assert err["details"] == {"session_id": sid}, body
            await human.error(body, 403, "FORBIDDEN")
        # the defect: an agent token ended a human's session, leaving its issue human_held
        await other.error({"type": "end_agent", "session_id": person}, 403, "FORBIDDEN")
        await other.error({"type": "release_issue", "session_id": person, "issue": "H-1"}, 403, "FORBIDDEN")
        assert await api.events("AgentEnded") == []
        # the owner drives it; an admin of the workspace may too
        await owner.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "I-1"})
        await owner.ok({"type": "heartbeat_agent", "session_id": sid})
        await api.ok({"type": "release_issue", "session_id": sid, "issue": "I-1"})
        await api.ok({"type": "end_agent", "session_id": person})
        registered = {e["data"]["session_id"]: e["data"]["token_id"] for e in await api.events("AgentRegistered")}
        assert registered[sid] != registered[person] and registered[sid].startswith("tok_")
    finally:
        for c in (owner, other, human):
            await c.close()
