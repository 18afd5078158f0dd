"""The work queue and named leases over HTTP against real servers, on both backends."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from tests.helpers import Api, ServerProcess, advance_clock


async def enqueue(api: Api, project: str = "P", **fields: Any) -> str:
    item_id: str = (await api.ok({"type": "enqueue_work", "project": project, **fields}))["item_id"]
    return item_id


async def claim(api: Api, sid: str, project: str = "P") -> dict[str, Any] | None:
    item: dict[str, Any] | None = (await api.ok({"type": "claim_next_work", "session_id": sid, "project": project}))[
        "item"
    ]
    return item


def max_live_leases(events: list[dict[str, Any]], project: str) -> int:
    """Replay grants and releases: the most leases of ``project`` unreleased at once."""
    live: set[str] = set()
    peak = 0
    for e in events:
        if e["type"] == "LeaseGranted" and e["data"]["project"] == project:
            live.add(e["data"]["issue"])
        elif e["type"] == "LeaseReleased":
            live.discard(e["data"]["issue"])
        peak = max(peak, len(live))
    return peak


async def test_claim_order_lifecycle_and_the_audit_ledger(api: Api, server: ServerProcess) -> None:
    low = await enqueue(api, priority=1, payload={"job": "low"})
    high_a = await enqueue(api, priority=5, issue="P-1", payload={"job": "a"}, paths=["./src//a.py"])
    high_b = await enqueue(api, priority=5, payload=None)
    agent = await api.client("agent")
    try:
        w = await agent.register(actor="worker-1", host="host-a")
        first = await claim(agent, w)
        assert first is not None
        assert first["item_id"] == high_a and first["status"] == "claimed" and first["fencing_token"] == 1
        assert first["payload"] == {"job": "a"} and first["paths"] == ["src/a.py"] and first["issue"] == "P-1"
        second = await claim(agent, w)
        assert second is not None and second["item_id"] == high_b and second["fencing_token"] is None
        third = await claim(agent, w)
        assert third is not None and third["item_id"] == low
        assert await claim(agent, w) is None  # nothing eligible: an empty answer, not an error
        await agent.ok({"type": "start_work", "session_id": w, "item_id": high_a})
        await agent.ok({"type": "finish_work", "session_id": w, "item_id": high_a, "outcome": "done"})
        await agent.ok({"type": "start_work", "session_id": w, "item_id": high_b})
        await agent.ok({"type": "finish_work", "session_id": w, "item_id": high_b, "outcome": "oom_killed"})
        await agent.ok({"type": "finish_work", "session_id": w, "item_id": low, "outcome": "cancelled"})
    finally:
        await agent.close()
    released = await api.events("LeaseReleased")
    assert [(e["data"]["issue"], e["data"]["reason"]) for e in released] == [("P-1", "completed")]
    queue = (await api.get("/v1/queue", project="P"))["items"]
    assert [i["item_id"] for i in queue] == [low, high_a, high_b]
    by_id = {i["item_id"]: i for i in queue}
    assert by_id[high_b]["status"] == "oom_killed" and by_id[low]["outcome"] == "cancelled"
    history = by_id[high_a]["history"]
    assert [h["action"] for h in history] == ["enqueued", "claimed", "started", "finished"]
    for h in history[1:]:
        assert (h["session_id"], h["actor_key"], h["host"]) == (w, "worker-1", "host-a")
    assert history[1]["detail"] == "fencing_token=1" and history[3]["detail"] == "done"
    assert all(h["at"].endswith("Z") for h in history)
    assert [i["item_id"] for i in (await api.get("/v1/queue", status="done"))["items"]] == [high_a]
    me = await api.get(f"/v1/agents/{w}")
    assert me["agent"]["session_id"] == w and me["agent"]["live"] is True
    assert [x["item_id"] for x in me["work"]] == [high_a, high_b, low]
    assert [h["action"] for h in me["work"][0]["history"]] == ["claimed", "started", "finished"]
    assert [(x["issue"], x["fencing_token"], x["release_reason"]) for x in me["leases"]] == [("P-1", 1, "completed")]
    r = await api.http.get("/v1/agents/s-nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"


async def test_invalid_transitions_not_holder_and_validation(api: Api, server: ServerProcess) -> None:
    agent = await api.client("agent")
    try:
        a = await agent.register(actor="a")
        b = await agent.register(actor="b")
        item = await enqueue(agent, issue="T-1")
        err = await agent.error({"type": "start_work", "session_id": a, "item_id": item}, 409, "INVALID_TRANSITION")
        assert err["details"] == {"item_id": item, "status": "queued", "wanted": "running"}
        await agent.error(
            {"type": "finish_work", "session_id": a, "item_id": item, "outcome": "cancelled"}, 403, "FORBIDDEN"
        )
        got = await claim(agent, a)
        assert got is not None and got["item_id"] == item
        err = await agent.error(
            {"type": "finish_work", "session_id": a, "item_id": item, "outcome": "done"}, 409, "INVALID_TRANSITION"
        )
        assert err["details"] == {"item_id": item, "status": "claimed", "wanted": "done"}
        err = await agent.error({"type": "start_work", "session_id": b, "item_id": item}, 409, "NOT_HOLDER")
        assert err["details"]["holder_session_id"] == a
        await agent.ok({"type": "start_work", "session_id": a, "item_id": item})
        await agent.error({"type": "start_work", "session_id": a, "item_id": item}, 409, "INVALID_TRANSITION")
        await agent.error(
            {"type": "finish_work", "session_id": b, "item_id": item, "outcome": "failed"}, 409, "NOT_HOLDER"
        )
        await agent.error({"type": "finish_work", "item_id": item, "outcome": "failed"}, 403, "FORBIDDEN")
        await agent.ok({"type": "finish_work", "session_id": a, "item_id": item, "outcome": "failed"})
        err = await agent.error(
            {"type": "finish_work", "session_id": a, "item_id": item, "outcome": "done"}, 409, "INVALID_TRANSITION"
        )
        assert err["details"] == {"item_id": item, "status": "failed", "wanted": "done"}
        await agent.error({"type": "start_work", "session_id": a, "item_id": "w-missing"}, 404, "NOT_FOUND")
        # Validation names the field.
        err = await agent.error(
            {"type": "enqueue_work", "project": "P", "paths": ["ok.py", "../up"]}, 422, "VALIDATION"
        )
        assert err["details"]["field"] == "paths[1]"
        err = await agent.error(
            {"type": "enqueue_work", "project": "P", "blocked_by": [item, "w-nope"]}, 422, "VALIDATION"
        )
        assert err["details"]["field"] == "blocked_by[1]"
        err = await agent.error({"type": "enqueue_work", "project": "OTHER", "issue": "T-1"}, 422, "VALIDATION")
        assert err["details"]["field"] == "issue"
        # An admin may cancel a queued item and move another session's item on.
        queued = await enqueue(agent)
        await api.ok({"type": "finish_work", "item_id": queued, "outcome": "cancelled"})
        other = await enqueue(agent)
        assert (await claim(agent, b) or {})["item_id"] == other
        admin_sid = await api.register(actor="ops")
        await api.ok({"type": "start_work", "session_id": admin_sid, "item_id": other})
        await api.ok({"type": "finish_work", "item_id": other, "outcome": "done"})
        # An ended session can do nothing more; a claiming command from it is refused.
        await agent.ok({"type": "end_agent", "session_id": b})
        await agent.error({"type": "claim_next_work", "session_id": b, "project": "P"}, 409, "SESSION_NOT_LIVE")
        await agent.error({"type": "acquire_lease", "session_id": b, "name": "dispatcher"}, 409, "SESSION_NOT_LIVE")
    finally:
        await agent.close()
    hist = (await api.get("/v1/queue", status="done"))["items"][0]["history"]
    assert [(h["action"], h["session_id"]) for h in hist] == [
        ("enqueued", None),
        ("claimed", b),
        ("started", admin_sid),
        ("finished", None),
    ]


async def test_blocked_items_wait_for_their_blockers(api: Api) -> None:
    w = await api.register(actor="w")
    first = await enqueue(api, priority=0)
    second = await enqueue(api, priority=0)
    blocked = await enqueue(api, priority=100, blocked_by=[first, second])
    got = await claim(api, w)
    assert got is not None and got["item_id"] == first  # the blocked high-priority item is held back
    for item in (first,):
        await api.ok({"type": "start_work", "session_id": w, "item_id": item})
        await api.ok({"type": "finish_work", "session_id": w, "item_id": item})
    got = await claim(api, w)
    assert got is not None and got["item_id"] == second  # one blocker is still open
    await api.ok({"type": "start_work", "session_id": w, "item_id": second})
    await api.ok({"type": "finish_work", "session_id": w, "item_id": second, "outcome": "failed"})
    assert await claim(api, w) is None  # a failed blocker keeps it blocked
    again = await enqueue(api)
    after = await enqueue(api, blocked_by=[again])
    assert (await claim(api, w) or {})["item_id"] == again
    assert await claim(api, w) is None
    await api.ok({"type": "start_work", "session_id": w, "item_id": again})
    await api.ok({"type": "finish_work", "session_id": w, "item_id": again})
    assert (await claim(api, w) or {})["item_id"] == after
    assert blocked in {i["item_id"] for i in (await api.get("/v1/queue", status="queued"))["items"]}


async def test_issue_held_or_over_cap_is_skipped_without_denials(api: Api) -> None:
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 2})
    holder = await api.register(actor="holder")
    w = await api.register(actor="w")
    await api.ok({"type": "claim_issue", "session_id": holder, "project": "P", "issue": "H-1"})
    held = await enqueue(api, priority=9, issue="H-1")
    free1 = await enqueue(api, priority=5, issue="F-1")
    free2 = await enqueue(api, priority=5, issue="F-2")
    plain = await enqueue(api, priority=1)
    assert (await claim(api, w) or {})["item_id"] == free1  # H-1 is held: skipped
    # The cap (2) is now full (H-1, F-1): F-2 is skipped, the issue-less item is not.
    assert (await claim(api, w) or {})["item_id"] == plain
    assert await claim(api, w) is None
    assert await api.events("WipCapDenied") == []
    await api.ok({"type": "release_issue", "session_id": holder, "issue": "H-1"})
    got = await claim(api, w)
    assert got is not None and got["item_id"] == held and got["fencing_token"] == 2
    _ = free2


async def test_paths_overlapping_a_live_exclusive_claim_are_skipped(api: Api) -> None:
    owner = await api.register(actor="owner")
    w = await api.register(actor="w")
    await api.ok({"type": "claim_files", "session_id": owner, "issue": "C-1", "paths": ["src/core/"]})
    clash = await enqueue(api, priority=9, paths=["src/core/**/*.py"])
    mine = await enqueue(api, priority=5, paths=["src/*.md"])
    assert (await claim(api, w) or {})["item_id"] == mine
    assert await claim(api, w) is None
    # The claimant's own claims do not hold it back.
    assert (await claim(api, owner) or {})["item_id"] == clash


async def test_many_workers_drain_a_hundred_items_each_handed_out_once(api: Api, server: ServerProcess) -> None:
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 4})
    items = [
        await enqueue(api, priority=random.randint(0, 3), issue=f"I-{i}" if i % 2 else None, payload={"n": i})
        for i in range(100)
    ]
    await drain(api, [server.base_url], items, workers=6, cap=4)


async def drain(api: Api, base_urls: list[str], items: list[str], workers: int, cap: int) -> None:
    """``workers`` concurrent clients pull, start and finish until every item is done."""
    finished: list[str] = []
    handed: list[str] = []

    async def worker(n: int) -> None:
        client = await api.client("agent", base_url=base_urls[n % len(base_urls)])
        try:
            sid = await client.register(actor=f"worker-{n}", host=f"host-{n % len(base_urls)}")
            while len(finished) < len(items):
                got = await claim(client, sid)
                if got is None:
                    await asyncio.sleep(0.01)
                    continue
                handed.append(got["item_id"])
                await client.ok({"type": "start_work", "session_id": sid, "item_id": got["item_id"]})
                await client.ok(
                    {"type": "finish_work", "session_id": sid, "item_id": got["item_id"], "outcome": "done"}
                )
                finished.append(got["item_id"])
        finally:
            await client.close()

    await asyncio.wait_for(asyncio.gather(*(worker(n) for n in range(workers))), timeout=60)
    assert sorted(handed) == sorted(items) and len(set(finished)) == len(items)
    events = await api.events()
    claims = Counter(e["data"]["item_id"] for e in events if e["type"] == "WorkClaimed")
    assert set(claims) == set(items) and set(claims.values()) == {1}
    assert not [e for e in events if e["type"] == "WorkRequeued"]
    grants = [e for e in events if e["type"] == "LeaseGranted"]
    assert (
        len(grants)
        == len({e["data"]["issue"] for e in grants})
        == sum(1 for e in events if e["type"] == "WorkEnqueued" and e["data"]["issue"])
    )
    assert max_live_leases(events, "P") <= cap
    assert {e["data"]["reason"] for e in events if e["type"] == "LeaseReleased"} == {"completed"}
    assert len({e["metadata"]["session_id"] for e in events if e["type"] == "WorkClaimed"}) > 1
    queue = (await api.get("/v1/queue", project="P", limit=10000))["items"]
    assert {i["status"] for i in queue} == {"done"}
    assert all([h["action"] for h in i["history"]] == ["enqueued", "claimed", "started", "finished"] for i in queue)


async def test_a_killed_worker_is_recovered_by_the_next_claim(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    server = start_server(ttl_seconds=1, test_clock=True)
    api = Api(server.base_url)
    agent = await api.client("agent")
    try:
        victim = await agent.register(actor="victim", host="h-dead")
        human = await api.register(actor="person", kind="human")
        item = await enqueue(api, issue="K-1", priority=2)
        human_item = await enqueue(api, issue="K-2", priority=1)
        plain = await enqueue(api, priority=0)
        assert (await claim(agent, victim) or {})["item_id"] == item
        await agent.ok({"type": "start_work", "session_id": victim, "item_id": item})
        assert (await claim(api, human) or {})["item_id"] == human_item
        assert (await claim(agent, victim) or {})["item_id"] == plain
        await advance_clock(db_url, 1.3)  # the victim and the human stop heartbeating
        rescuer = await agent.register(actor="rescuer")
        got = await claim(agent, rescuer)
        assert got is not None and got["item_id"] == item and got["fencing_token"] == 2
        events = await api.events()
        requeued = [e["data"] for e in events if e["type"] == "WorkRequeued"]
        assert sorted((r["item_id"], r["session_id"], r["reason"]) for r in requeued) == sorted(
            [(item, victim, "worker_stale"), (plain, victim, "worker_stale")]
        )
        released = [e["data"] for e in events if e["type"] == "LeaseReleased"]
        assert [(r["issue"], r["session_id"], r["reason"]) for r in released] == [("K-1", victim, "expired")]
        assert not [e for e in events if e["type"] == "LeaseReleased" and e["data"]["issue"] == "K-2"]
        # The victim wakes up: its item is gone, and its finish is refused.
        await agent.error({"type": "start_work", "session_id": victim, "item_id": item}, 409, "NOT_HOLDER")
        hist = next(i for i in (await api.get("/v1/queue"))["items"] if i["item_id"] == item)["history"]
        assert [(h["action"], h["session_id"], h["detail"]) for h in hist] == [
            ("enqueued", None, None),
            ("claimed", victim, "fencing_token=1"),
            ("started", victim, None),
            ("requeued", victim, "worker_stale"),
            ("claimed", rescuer, "fencing_token=2"),
        ]
        assert hist[3]["host"] == "h-dead"
        # Any queue command on the project recovers: here an enqueue, after the rescuer dies.
        await advance_clock(db_url, 1.3)
        await enqueue(api)
        last = [e["data"] for e in await api.events("WorkRequeued", "LeaseReleased")][-2:]
        assert (last[0]["item_id"], last[0]["session_id"], last[0]["reason"]) == (item, rescuer, "worker_stale")
        assert (last[1]["issue"], last[1]["reason"]) == ("K-1", "expired")
        status = {i["item_id"]: i["status"] for i in (await api.get("/v1/queue"))["items"]}
        assert status[item] == "queued" and status[plain] == "queued" and status[human_item] == "claimed"
        await api.ok({"type": "heartbeat_agent", "session_id": human})  # a stale session revives
        await api.ok({"type": "acquire_lease", "session_id": human, "name": "leader", "ttl_seconds": 600})
        before = await read_models(api, victim, rescuer, human)
    finally:
        await agent.close()
        await api.close()
    # A rebuild from position 0 reproduces the queue's read models exactly.
    server.stop()
    rebuilt = subprocess.run(
        [sys.executable, "-m", "eventcoord.cli", "rebuild", "--db", db_url], capture_output=True, text=True, timeout=60
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    again = Api(start_server(ttl_seconds=1, test_clock=True).base_url)
    try:
        assert await read_models(again, victim, rescuer, human) == before
    finally:
        await again.close()


async def test_a_pull_never_hands_out_an_issue_that_is_not_free(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    """A stale holder's issue queued first is skipped, not reclaimed."""
    api = Api(start_server(ttl_seconds=1, test_clock=True).base_url)
    try:
        holder = await api.register(actor="holder")
        await api.ok({"type": "claim_issue", "session_id": holder, "project": "P", "issue": "S-1"})
        stale_item = await enqueue(api, priority=9, issue="S-1")
        free_item = await enqueue(api, priority=1, issue="F-1")
        await advance_clock(db_url, 1.3)  # the holder stops heartbeating: S-1 is reclaimable, not free
        state = await api.get("/v1/issues/S-1/state")
        assert state["state"] == "reclaimable"
        w = await api.register(actor="worker")
        got = await claim(api, w)
        assert got is not None and got["item_id"] == free_item
        assert await claim(api, w) is None
        assert [e["data"]["reason"] for e in await api.events("LeaseReleased")] == []
        leases = {x["issue"]: x["session_id"] for x in (await api.get("/v1/leases"))["leases"]}
        assert leases == {"S-1": holder, "F-1": w}
        # claim_issue is the explicit takeover; afterwards nothing is left to pull
        await api.ok({"type": "claim_issue", "session_id": w, "project": "P", "issue": "S-1"})
        got = await claim(api, w)
        assert got is not None and got["item_id"] == stale_item  # now the caller's own lease
    finally:
        await api.close()


async def read_models(api: Api, *sessions: str) -> list[Any]:
    agents = [await api.get(f"/v1/agents/{s}") for s in sessions]
    for a in agents:
        a["agent"].pop("live")
    return [(await api.get("/v1/queue"))["items"], (await api.get("/v1/named-leases"))["leases"], agents]


async def test_end_agent_requeues_and_releases(api: Api) -> None:
    w = await api.register(actor="w")
    item = await enqueue(api, issue="E-1")
    await claim(api, w)
    await api.ok({"type": "acquire_lease", "session_id": w, "name": "dispatcher"})
    await api.ok({"type": "end_agent", "session_id": w})
    queue = (await api.get("/v1/queue"))["items"]
    assert queue[0]["status"] == "queued" and queue[0]["history"][-1]["detail"] == "agent_ended"
    named = (await api.get("/v1/named-leases"))["leases"]
    assert named[0]["session_id"] is None and named[0]["held"] is False
    other = await api.register(actor="other")
    got = await claim(api, other)
    assert got is not None and got["item_id"] == item and got["fencing_token"] == 2
    assert (await api.ok({"type": "acquire_lease", "session_id": other, "name": "dispatcher"}))["fencing_token"] == 2


async def test_dispatchers_race_for_one_named_lease(db_url: str, start_server: Callable[..., ServerProcess]) -> None:
    api = Api(start_server(test_clock=True).base_url)
    try:
        await dispatchers_race(db_url, api)
    finally:
        await api.close()


async def dispatchers_race(db_url: str, api: Api) -> None:
    dispatchers = [await api.register(actor=f"dispatcher-{i}") for i in range(8)]
    answers = await asyncio.gather(
        *(
            api.command({"type": "acquire_lease", "session_id": s, "name": "queue-dispatcher", "ttl_seconds": 1})
            for s in dispatchers
        )
    )
    winners = [s for s, r in zip(dispatchers, answers, strict=True) if r.status_code == 200]
    assert len(winners) == 1
    leader = winners[0]
    first = next(r.json()["result"] for r in answers if r.status_code == 200)
    assert first["fencing_token"] == 1 and first["expires_at"].endswith("Z")
    losers = [r.json()["error"] for r in answers if r.status_code != 200]
    assert {e["code"] for e in losers} == {"LEASE_HELD"}
    assert set(losers[0]["details"]) == {"name", "session_id", "actor_key", "expires_at"}
    assert losers[0]["details"]["session_id"] == leader
    other = next(s for s in dispatchers if s != leader)
    await api.error({"type": "renew_lease", "session_id": other, "name": "queue-dispatcher"}, 409, "NOT_HOLDER")
    await api.error({"type": "release_lease", "session_id": other, "name": "queue-dispatcher"}, 409, "NOT_HOLDER")
    renewed = await api.ok({"type": "renew_lease", "session_id": leader, "name": "queue-dispatcher", "ttl_seconds": 1})
    assert renewed["fencing_token"] == 1 and renewed["expires_at"] > first["expires_at"]
    again = await api.command(
        {"type": "acquire_lease", "session_id": leader, "name": "queue-dispatcher", "ttl_seconds": 1}
    )
    assert again.json()["result"]["fencing_token"] == 1
    assert [e["type"] for e in again.json()["events"]] == ["NamedLeaseRenewed"]
    # The leader stops renewing: after the TTL the others race again, one takes over.
    await advance_clock(db_url, 1.2)
    answers = await asyncio.gather(
        *(
            api.command({"type": "acquire_lease", "session_id": s, "name": "queue-dispatcher"})
            for s in dispatchers
            if s != leader
        )
    )
    assert sorted(r.status_code for r in answers) == [200] + [409] * 6
    took = next(r.json()["result"] for r in answers if r.status_code == 200)
    assert took["fencing_token"] == 2 and took["ttl_seconds"] == 30
    await api.error({"type": "renew_lease", "session_id": leader, "name": "queue-dispatcher"}, 409, "NOT_HOLDER")
    held = await api.error(
        {"type": "acquire_lease", "session_id": leader, "name": "queue-dispatcher"}, 409, "LEASE_HELD"
    )
    new_leader = held["details"]["session_id"]
    released = await api.ok({"type": "release_lease", "session_id": new_leader, "name": "queue-dispatcher"})
    assert released["fencing_token"] == 2
    assert (await api.ok({"type": "acquire_lease", "session_id": leader, "name": "queue-dispatcher"}))[
        "fencing_token"
    ] == 3
    types = [e["type"] for e in await api.events() if e["stream"] == "lease:queue-dispatcher"]
    assert types == [
        "NamedLeaseAcquired",
        "NamedLeaseRenewed",
        "NamedLeaseRenewed",
        "NamedLeaseReleased",
        "NamedLeaseAcquired",
        "NamedLeaseReleased",
        "NamedLeaseAcquired",
    ]
    reasons = [e["data"].get("reason") for e in await api.events("NamedLeaseReleased")]
    assert reasons == ["expired", "released"]
    listed = (await api.get("/v1/named-leases"))["leases"]
    assert [(x["name"], x["session_id"], x["fencing_token"], x["held"]) for x in listed] == [
        ("queue-dispatcher", leader, 3, True)
    ]


@pytest.mark.postgres
async def test_two_server_processes_drain_one_queue(start_server: Callable[..., ServerProcess]) -> None:
    one, two = start_server(), start_server()
    api = Api(one.base_url)
    try:
        await api.ok({"type": "configure_project", "project": "P", "wip_limit": 5})
        items = [await enqueue(api, priority=i % 4, issue=f"R-{i}" if i % 3 else None) for i in range(100)]
        await drain(api, [one.base_url, two.base_url], items, workers=8, cap=5)
        # Two dispatchers on two replicas: one leader.
        a, b = await api.register(actor="d-a"), await api.register(actor="d-b")
        other = Api(two.base_url)
        try:
            answers = await asyncio.gather(
                api.command({"type": "acquire_lease", "session_id": a, "name": "dispatcher"}),
                other.command({"type": "acquire_lease", "session_id": b, "name": "dispatcher"}),
            )
        finally:
            await other.close()
        assert sorted(r.status_code for r in answers) == [200, 409]
    finally:
        await api.close()


async def test_a_pull_takes_what_it_may_past_issues_others_hold(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    """Items on issues other sessions hold are passed (by the database, as it walks the
    queue); items on the caller's own issue, and on an issue whose stale holder this very
    pull recovers, are taken."""
    api = Api(start_server(ttl_seconds=2, test_clock=True).base_url)

    async def claim_live(sid: str) -> dict[str, Any] | None:
        # a sign of life first: the pull must find the caller live however slow the machine
        await api.ok({"type": "heartbeat_agent", "session_id": sid})
        return await claim(api, sid)

    try:
        victim = await api.register(actor="victim")
        recovered = await enqueue(api, priority=0, issue="R-1")
        assert (await claim(api, victim) or {})["item_id"] == recovered
        await api.ok({"type": "start_work", "session_id": victim, "item_id": recovered})
        behind_victim = await enqueue(api, priority=5, issue="R-1")  # its issue is the victim's
        me, other = await api.register(actor="me"), await api.register(actor="other")
        await api.ok({"type": "claim_issue", "session_id": other, "project": "P", "issue": "H-1"})
        await api.ok({"type": "claim_issue", "session_id": me, "project": "P", "issue": "M-1"})
        held = [await enqueue(api, priority=9, issue="H-1") for _ in range(3)]
        mine = await enqueue(api, priority=3, issue="M-1")
        await advance_clock(db_url, 2.3)  # the victim stops heartbeating; the other comes back
        await api.ok({"type": "heartbeat_agent", "session_id": other})
        # This pull recovers the victim's item and releases R-1: the item queued on R-1 ahead
        # of the recovered one is taken, on the lease its recovery freed; the other's items
        # (ahead of both) are passed, their holder live (or stale, on a slow machine: the same).
        got = await claim_live(me)
        assert got is not None and got["item_id"] == behind_victim and got["fencing_token"] == 2
        got = await claim_live(me)  # the caller's own issue: taken, its lease kept
        assert got is not None and got["item_id"] == mine
        got = await claim_live(me)
        assert got is not None and got["item_id"] == recovered
        assert await claim_live(me) is None  # only the other's items are left
        status = {i["item_id"]: i["status"] for i in (await api.get("/v1/queue"))["items"]}
        assert [status[i] for i in held] == ["queued"] * 3
    finally:
        await api.close()
