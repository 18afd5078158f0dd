"""One table: every role x every command and every read, across two workspaces, on both
backends (docs/protocol.md#roles): ``reader`` reads only; ``agent`` every
command except issue_token, revoke_token, configure_project, a forced claim_issue and a
human register_agent; ``human`` adds those last two; ``admin`` everything in its workspace.
Another workspace's resources are invisible (404), another token's session is 403."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.helpers import Api, ServerProcess

from eventcoord.commands import COMMAND_TYPES

ROLES = ("admin", "human", "agent", "reader")
ADMIN_ONLY = {"issue_token", "revoke_token", "configure_project"}
HUMAN_OR_ADMIN = {"claim_issue+force", "register_agent+human"}


def allowed(role: str, case: str) -> bool:
    if role == "reader":
        return False
    if case.split("+")[0] in ADMIN_ONLY:
        return role == "admin"
    if case in HUMAN_OR_ADMIN:
        return role in ("admin", "human")
    return True


def commands(sid: str, role: str, spare_token_id: str) -> dict[str, dict[str, Any]]:
    """A body for every command (and the role-sensitive variants), acting as ``sid``."""
    issue = f"I-{role}"
    return {
        "register_agent": {"type": "register_agent", "actor": f"{role}-2"},
        "register_agent+human": {"type": "register_agent", "actor": f"{role}-h", "kind": "human"},
        "heartbeat_agent": {"type": "heartbeat_agent", "session_id": sid},
        "configure_project": {"type": "configure_project", "project": "P", "wip_limit": 50},
        "issue_token": {"type": "issue_token", "role": "reader"},
        "revoke_token": {"type": "revoke_token", "token_id": spare_token_id},
        "claim_issue": {"type": "claim_issue", "session_id": sid, "project": "P", "issue": issue},
        "claim_issue+force": {
            "type": "claim_issue",
            "session_id": sid,
            "project": "P",
            "issue": f"F-{role}",
            "force": True,
        },
        "verify_hold": {"type": "verify_hold", "session_id": sid, "issue": issue},
        "claim_files": {"type": "claim_files", "session_id": sid, "issue": issue, "paths": [f"src/{role}/"]},
        "release_files": {"type": "release_files", "session_id": sid, "issue": issue},
        "post_message": {"type": "post_message", "session_id": sid, "channel": f"issue:{issue}", "body": "hi"},
        "release_issue": {"type": "release_issue", "session_id": sid, "issue": issue},
        "enqueue_work": {"type": "enqueue_work", "project": "P", "issue": f"Q-{role}"},
        "claim_next_work": {"type": "claim_next_work", "session_id": sid, "project": "P"},
        "start_work": {"type": "start_work", "session_id": sid, "item_id": "w-none"},
        "finish_work": {"type": "finish_work", "session_id": sid, "item_id": "w-none"},
        "acquire_lease": {"type": "acquire_lease", "session_id": sid, "name": f"lease-{role}"},
        "renew_lease": {"type": "renew_lease", "session_id": sid, "name": f"lease-{role}"},
        "release_lease": {"type": "release_lease", "session_id": sid, "name": f"lease-{role}"},
        "cancel_wait": {"type": "cancel_wait", "session_id": sid, "issue": f"W-{role}"},
        "end_agent": {"type": "end_agent", "session_id": sid},
    }


def reads(sid: str) -> list[str]:
    return [
        "/v1/agents",
        f"/v1/agents/{sid}",
        "/v1/leases",
        "/v1/issues/I-admin/state",
        "/v1/file-claims",
        "/v1/conflicts",
        "/v1/heatmap",
        "/v1/queue",
        "/v1/named-leases",
        "/v1/waits",
        "/v1/messages?channel=issue:I-admin",
        "/v1/events",
    ]


async def tokens_of(operator: Api, workspace: str) -> dict[str, tuple[str, str]]:
    out = {}
    for role in ROLES:
        got = await operator.ok({"type": "issue_token", "role": role, "workspace": workspace})
        out[role] = (got["token"], got["token_id"])
    return out


async def test_every_role_against_every_command_and_read_in_two_workspaces(api: Api, server: ServerProcess) -> None:
    workspaces = {ws: await tokens_of(api, ws) for ws in ("ws1", "ws2")}
    clients = {
        (ws, role): Api(server.base_url, tok) for ws, toks in workspaces.items() for role, (tok, _) in toks.items()
    }
    try:
        sessions: dict[tuple[str, str], str] = {}
        for ws in workspaces:
            for role in ROLES:
                owner = clients[(ws, role if role != "reader" else "admin")]
                sessions[(ws, role)] = await owner.register(actor=f"{ws}-{role}")
        # The table itself: every command type appears; each cell is allowed or 403.
        table = commands("s", "r", "t")
        assert {case.split("+")[0] for case in table} == set(COMMAND_TYPES)
        failures: list[str] = []
        for ws in workspaces:
            for role in ROLES:
                spare = (await clients[(ws, "admin")].ok({"type": "issue_token", "role": "reader"}))["token_id"]
                for case, body in commands(sessions[(ws, role)], role, spare).items():
                    r = await clients[(ws, role)].command(body)
                    code = r.json().get("error", {}).get("code") if r.status_code != 200 else None
                    if allowed(role, case):
                        ok = r.status_code < 500 and r.status_code not in (401, 403)
                    else:
                        ok = r.status_code == 403 and code == "FORBIDDEN"
                    if not ok:
                        failures.append(f"{ws} {role} {case}: {r.status_code} {r.text[:160]}")
                for path in reads(sessions[(ws, role)]):
                    r = await clients[(ws, role)].http.get(path)
                    if r.status_code != 200:
                        failures.append(f"{ws} {role} GET {path}: {r.status_code} {r.text[:160]}")
        assert failures == []

        # Across workspaces: nothing is visible, nothing can be driven.
        other: Callable[[str], str] = lambda ws: "ws2" if ws == "ws1" else "ws1"  # noqa: E731
        for ws in workspaces:
            foreign = sessions[(other(ws), "agent")]
            for role in ROLES:
                me = clients[(ws, role)]
                r = await me.http.get(f"/v1/agents/{foreign}")
                assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND", (ws, role, r.text)
                listed = {a["session_id"] for a in (await me.get("/v1/agents"))["agents"]}
                assert foreign not in listed and sessions[(ws, "agent")] in listed
                events = (await me.get("/v1/events", limit=1000))["events"]
                assert events and all(e["metadata"]["workspace"] == ws for e in events)
                for body in (
                    {"type": "heartbeat_agent", "session_id": foreign},
                    {"type": "claim_issue", "session_id": foreign, "project": "P", "issue": "X-1"},
                    {"type": "end_agent", "session_id": foreign},
                ):
                    r = await me.command(body)
                    want = 403 if role == "reader" else 404
                    assert r.status_code == want, (ws, role, body["type"], r.text)
            # an admin may not revoke another workspace's token: it is invisible
            foreign_token = workspaces[other(ws)]["reader"][1]
            r = await clients[(ws, "admin")].command({"type": "revoke_token", "token_id": foreign_token})
            assert r.status_code == 404, r.text
            # within a workspace, another token's session is 403 for non-admins
            mine, theirs = clients[(ws, "agent")], sessions[(ws, "human")]
            r = await mine.command({"type": "heartbeat_agent", "session_id": theirs})
            assert r.status_code == 403 and r.json()["error"]["code"] == "FORBIDDEN", r.text
    finally:
        for c in clients.values():
            await c.close()
