"""Issue leases over HTTP against real servers, on both backends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from tests.helpers import Api, ServerProcess, advance_clock


async def test_claim_release_and_not_holder(api: Api) -> None:
    a = await api.register(actor="alice")
    b = await api.register(actor="bob")
    first = await api.ok({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-1"})
    assert first["fencing_token"] == 1
    again = await api.command({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-1"})
    assert again.json()["events"] == [] and again.json()["result"]["fencing_token"] == 1
    err = await api.error({"type": "claim_issue", "session_id": b, "project": "P", "issue": "P-1"}, 409, "ISSUE_HELD")
    assert err["details"] == {"issue": "P-1", "session_id": a, "actor_key": "alice"}
    await api.error({"type": "release_issue", "session_id": b, "issue": "P-1"}, 409, "NOT_HOLDER")
    await api.ok({"type": "release_issue", "session_id": a, "issue": "P-1", "reason": "completed"})
    second = await api.ok({"type": "claim_issue", "session_id": b, "project": "P", "issue": "P-1"})
    assert second["fencing_token"] == 2
    released = await api.events("LeaseReleased")
    assert [e["data"]["reason"] for e in released] == ["completed"]
    await api.error({"type": "claim_issue", "session_id": a, "project": "Q", "issue": "P-1"}, 422, "VALIDATION")
    leases = (await api.get("/v1/leases"))["leases"]
    assert [(x["issue"], x["session_id"], x["live"]) for x in leases] == [("P-1", b, True)]


async def test_twenty_concurrent_clients_racing_for_one_issue_have_one_winner(api: Api) -> None:
    sessions = [await api.register(actor=f"agent-{i}") for i in range(24)]
    answers = await asyncio.gather(
        *(api.command({"type": "claim_issue", "session_id": s, "project": "P", "issue": "HOT-1"}) for s in sessions)
    )
    codes = sorted(r.status_code for r in answers)
    assert codes.count(200) == 1 and codes.count(409) == 23
    assert {r.json()["error"]["code"] for r in answers if r.status_code == 409} == {"ISSUE_HELD"}
    assert len(await api.events("LeaseGranted")) == 1


async def test_ten_concurrent_claims_against_wip_limit_three(api: Api) -> None:
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 3})
    sessions = [await api.register(actor=f"agent-{i}") for i in range(10)]
    answers = await asyncio.gather(
        *(
            api.command({"type": "claim_issue", "session_id": s, "project": "P", "issue": f"P-{i}"})
            for i, s in enumerate(sessions)
        )
    )
    granted = [r for r in answers if r.status_code == 200]
    denied = [r.json() for r in answers if r.status_code == 409]
    assert len(granted) == 3 and len(denied) == 7
    assert all(d["error"]["code"] == "WIP_CAP_REACHED" for d in denied)
    assert all(d["error"]["details"] == {"project": "P", "limit": 3, "live_count": 3} for d in denied)
    assert len(await api.events("WipCapDenied")) == 7
    assert len(await api.events("LeaseGranted")) == 3


@pytest.mark.postgres
async def test_races_across_two_server_processes_on_one_postgres(start_server: Callable[..., ServerProcess]) -> None:
    one, two = start_server(), start_server()
    a, b = Api(one.base_url), Api(two.base_url)
    try:
        await a.ok({"type": "configure_project", "project": "P", "wip_limit": 3})
        sessions = [await (a if i % 2 else b).register(actor=f"agent-{i}") for i in range(24)]
        race = await asyncio.gather(
            *(
                (a if i % 2 else b).command({"type": "claim_issue", "session_id": s, "project": "P", "issue": "HOT"})
                for i, s in enumerate(sessions)
            )
        )
        assert sorted(r.status_code for r in race).count(200) == 1
        cap = await asyncio.gather(
            *(
                (a if i % 2 else b).command({"type": "claim_issue", "session_id": s, "project": "P", "issue": f"P-{i}"})
                for i, s in enumerate(sessions[:12])
            )
        )
        # HOT already holds one of the three slots (or its winner is among these sessions).
        leases = (await a.get("/v1/leases", project="P"))["leases"]
        assert len(leases) == 3
        assert sum(r.status_code == 200 for r in cap) + 1 >= 3
        assert len(await a.events("WipCapDenied")) == sum(
            r.status_code == 409 and r.json()["error"]["code"] == "WIP_CAP_REACHED" for r in cap
        )
        positions = [e["position"] for e in await b.events()]
        assert positions == list(range(1, len(positions) + 1))
    finally:
        await a.close()
        await b.close()


async def test_stale_holder_is_reclaimed_with_its_handoff_note(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    server = start_server(ttl_seconds=1, test_clock=True)
    api = Api(server.base_url)
    try:
        a = await api.register(actor="alice")
        b = await api.register(actor="bob")
        await api.ok({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-1"})
        await api.ok({"type": "heartbeat_agent", "session_id": a, "handoff_note": "tests written,\nimpl next"})
        await advance_clock(db_url, 1.3)
        await api.ok({"type": "heartbeat_agent", "session_id": b})
        state = await api.get("/v1/issues/P-1/state", **{"as": b})
        assert (state["state"], state["reason"]) == ("reclaimable", "assignment_holder_stale")
        # The stale session may not claim anything else meanwhile.
        await api.error(
            {"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-2"}, 409, "SESSION_NOT_LIVE"
        )
        got = await api.ok({"type": "claim_issue", "session_id": b, "project": "P", "issue": "P-1"})
        assert got["fencing_token"] == 2
        assert got["reclaimed_from"] == {
            "session_id": a,
            "actor_key": "alice",
            "handoff_note": "tests written,\nimpl next",
        }
        released = await api.events("LeaseReleased")
        assert released[-1]["data"]["reason"] == "expired" and released[-1]["data"]["session_id"] == a
        # The woken zombie is caught at the publish gate.
        await api.ok({"type": "heartbeat_agent", "session_id": a})
        await api.error(
            {"type": "verify_hold", "session_id": a, "issue": "P-1", "fencing_token": 1}, 409, "NOT_FRESH_HOLDER"
        )
        await api.error({"type": "verify_hold", "session_id": a, "issue": "P-1"}, 409, "NOT_FRESH_HOLDER")
        ok = await api.ok({"type": "verify_hold", "session_id": b, "issue": "P-1", "fencing_token": 2})
        assert ok == {"ok": True, "enforced": True, "effective_state": "self_is_holder", "reason": "assignment_self"}
    finally:
        await api.close()


async def test_human_held_leases_are_never_reclaimed_but_can_be_forced(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    server = start_server(ttl_seconds=1, test_clock=True)
    admin = Api(server.base_url)
    agent = await admin.client("agent")
    try:
        human = await admin.register(actor="carol", kind="human")
        await agent.error({"type": "register_agent", "actor": "x", "kind": "human"}, 403, "FORBIDDEN")
        bot = await agent.register(actor="bot")
        await admin.ok({"type": "claim_issue", "session_id": human, "project": "P", "issue": "P-1"})
        await advance_clock(db_url, 1.3)
        await agent.ok({"type": "heartbeat_agent", "session_id": bot})
        err = await agent.error(
            {"type": "claim_issue", "session_id": bot, "project": "P", "issue": "P-1"}, 409, "HUMAN_HELD"
        )
        assert err["details"]["session_id"] == human
        await agent.error(
            {"type": "claim_issue", "session_id": bot, "project": "P", "issue": "P-1", "force": True}, 403, "FORBIDDEN"
        )
        state = await agent.get("/v1/issues/P-1/state", **{"as": bot})
        assert (state["state"], state["reason"]) == ("human_held", "human_assignment")
        boss = await admin.register(actor="dave", kind="human")
        forced = await admin.ok(
            {"type": "claim_issue", "session_id": boss, "project": "P", "issue": "P-1", "force": True}
        )
        assert forced["fencing_token"] == 2
        assert (await admin.events("LeaseReleased"))[-1]["data"]["reason"] == "superseded"
    finally:
        await admin.close()
        await agent.close()


async def test_a_forced_takeover_is_told_to_the_holder_who_loses_it(api: Api) -> None:
    """claim_issue with force posts on the previous holder's ``agent:`` channel, naming the new
    holder, as a forced claim_files does; the audit stays on the issue's events."""
    a = await api.register(actor="alice")
    boss = await api.register(actor="boss", kind="human")
    await api.ok({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-1"})
    before = await api.head()
    taken = await api.command(
        {"type": "claim_issue", "session_id": boss, "project": "P", "issue": "P-1", "force": True}
    )
    assert taken.status_code == 200, taken.text
    token = taken.json()["result"]["fencing_token"]
    told = (await api.get("/v1/messages", channel=f"agent:{a}"))["messages"]
    assert len(told) == 1 and told[0]["position"] > before
    assert (told[0]["session_id"], told[0]["actor_key"]) == (boss, "boss")
    assert "P-1" in told[0]["body"] and boss in told[0]["body"] and f"token {token}" in told[0]["body"]
    assert [e["type"] for e in taken.json()["events"]] == ["LeaseReleased", "LeaseGranted", "MessagePosted"]
    # a claim that supersedes nobody (a free issue, or one's own) tells nobody
    await api.ok({"type": "claim_issue", "session_id": boss, "project": "P", "issue": "P-2", "force": True})
    await api.ok({"type": "claim_issue", "session_id": boss, "project": "P", "issue": "P-1", "force": True})
    assert len((await api.get("/v1/messages", channel=f"agent:{a}"))["messages"]) == 1
    assert (await api.get("/v1/messages", channel=f"agent:{boss}"))["messages"] == []


async def test_forced_takeover_of_a_live_lease_catches_the_superseded_holder(api: Api) -> None:
    a = await api.register(actor="alice")
    boss = await api.register(actor="boss", kind="human")
    t1 = (await api.ok({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-1"}))["fencing_token"]
    t2 = (await api.ok({"type": "claim_issue", "session_id": boss, "project": "P", "issue": "P-1", "force": True}))[
        "fencing_token"
    ]
    assert t2 > t1
    err = await api.error(
        {"type": "verify_hold", "session_id": a, "issue": "P-1", "fencing_token": t1}, 409, "NOT_FRESH_HOLDER"
    )
    assert err["details"]["current_fencing_token"] == t2
    # An unstable identity is advisory only, however stale its view.
    anon = await api.register(process_ancestry="ppid-77-start-123")
    advisory = await api.ok({"type": "verify_hold", "session_id": anon, "issue": "P-1"})
    assert advisory == {
        "ok": True,
        "enforced": False,
        "effective_state": "not_evaluated",
        "reason": "actor-identity-unstable-advisory-only",
    }


async def test_a_declared_working_on_blocks_claims_but_not_publish(api: Api) -> None:
    a = await api.register(actor="alice", working_on="P-9")
    b = await api.register(actor="bob")
    err = await api.error({"type": "claim_issue", "session_id": b, "project": "P", "issue": "P-9"}, 409, "ISSUE_HELD")
    assert err["details"]["session_id"] == a
    state = await api.get("/v1/issues/P-9/state", **{"as": b})
    assert (state["state"], state["reason"]) == ("held", "liveness_claim_present_assignment_lagging")
    passed = await api.ok({"type": "verify_hold", "session_id": b, "issue": "P-9"})
    assert passed["ok"] is True and passed["enforced"] is True
    # The declarer itself may claim; null clears the declaration.
    await api.ok({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-9"})
    await api.ok({"type": "heartbeat_agent", "session_id": a, "working_on": None})
    await api.ok({"type": "release_issue", "session_id": a, "issue": "P-9"})
    assert (await api.get("/v1/issues/P-9/state", **{"as": b}))["state"] == "free"


async def test_end_agent_releases_every_lease_with_its_handoff_note(api: Api) -> None:
    a = await api.register(actor="alice")
    b = await api.register(actor="bob")
    for issue in ("P-1", "P-2"):
        await api.ok({"type": "claim_issue", "session_id": a, "project": "P", "issue": issue})
    ended = await api.ok({"type": "end_agent", "session_id": a, "handoff_note": "see branch wip/p"})
    assert sorted(ended["released_leases"]) == ["P-1", "P-2"]
    reasons = [e["data"]["reason"] for e in await api.events("LeaseReleased")]
    assert reasons == ["agent_ended", "agent_ended"]
    got = await api.ok({"type": "claim_issue", "session_id": b, "project": "P", "issue": "P-2"})
    assert got["handoff_note"] == "see branch wip/p" and "reclaimed_from" not in got
    await api.error({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-3"}, 409, "SESSION_NOT_LIVE")
    await api.error({"type": "heartbeat_agent", "session_id": a}, 409, "SESSION_NOT_LIVE")


async def test_a_release_names_its_project_on_the_wire_and_frees_its_place_under_the_cap(api: Api) -> None:
    """``LeaseReleased`` names the lease's project (docs/events.md, v3) in ``/v1/events``; an
    agent's end, which does not read its leases' projects, leaves it out. Either way the
    project's count of live leases follows, so the cap admits the next claim."""
    a = await api.register(actor="alice")
    b = await api.register(actor="bob")
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 1})
    await api.ok({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-1"})
    await api.error({"type": "claim_issue", "session_id": b, "project": "P", "issue": "P-2"}, 409, "WIP_CAP_REACHED")
    await api.ok({"type": "release_issue", "session_id": a, "issue": "P-1"})
    await api.ok({"type": "claim_issue", "session_id": b, "project": "P", "issue": "P-2"})
    await api.ok({"type": "end_agent", "session_id": b})
    await api.ok({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-3"})
    released = [
        (e["data"]["issue"], e["data"]["reason"], e["data"].get("project")) for e in await api.events("LeaseReleased")
    ]
    assert released == [("P-1", "released", "P"), ("P-2", "agent_ended", None)]
