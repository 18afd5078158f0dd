"""Waiting lines over HTTP with real concurrent clients, on both backends (docs/protocol.md#waiting)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from tests.helpers import Api, ServerProcess, advance_clock, run_cli

ROUND_BOUND_S = 60.0  # a bound on a whole hand-off chain, never a timed assertion


async def _waiter(api: Api, sid: str, issue: str, order: list[str]) -> None:
    """A real client: wait for the message that the issue is ours, check, then release it."""
    deadline = time.monotonic() + ROUND_BOUND_S
    while True:
        msgs = (await api.get("/v1/messages", channel=f"agent:{sid}"))["messages"]
        if any(f"Issue {issue} is yours now" in m["body"] for m in msgs):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"{sid} was never handed {issue}")
        await asyncio.sleep(0.02)
    held = [x for x in (await api.get("/v1/leases"))["leases"] if x["issue"] == issue]
    assert [x["session_id"] for x in held] == [sid]  # exactly one holder: me
    order.append(sid)
    await api.ok({"type": "release_issue", "session_id": sid, "issue": issue})


async def _fifo_round(clients: list[Api], n: int = 20) -> None:
    first = clients[0]
    holder = await first.register(actor="holder")
    await first.ok({"type": "claim_issue", "session_id": holder, "project": "P", "issue": "HOT"})
    sids = [await clients[i % len(clients)].register(actor=f"w{i}") for i in range(n)]
    joins = await asyncio.gather(
        *(
            clients[i % len(clients)].command(
                {"type": "claim_issue", "session_id": s, "project": "P", "issue": "HOT", "wait": True}
            )
            for i, s in enumerate(sids)
        )
    )
    assert {r.status_code for r in joins} == {409}
    assert {r.json()["error"]["code"] for r in joins} == {"ISSUE_HELD"}
    assert sorted(r.json()["error"]["details"]["waiting"]["place"] for r in joins) == list(range(1, n + 1))
    started = [e["data"]["session_id"] for e in await first.events("WaitStarted")]
    assert sorted(started) == sorted(sids)
    waits = (await first.get("/v1/waits"))["waits"]
    assert [(w["kind"], w["key"], w["session_id"], w["place"]) for w in waits] == [
        ("issue", "HOT", s, i) for i, s in enumerate(started, 1)
    ]
    order: list[str] = []
    tasks = [asyncio.create_task(_waiter(clients[i % len(clients)], s, "HOT", order)) for i, s in enumerate(sids)]
    await first.ok({"type": "release_issue", "session_id": holder, "issue": "HOT"})
    await asyncio.gather(*tasks)
    assert order == started  # FIFO: nobody skipped, nobody twice
    log = [e for e in await first.events("LeaseGranted", "LeaseReleased") if e["data"]["issue"] == "HOT"]
    kinds = [e["type"] for e in log]
    assert kinds == ["LeaseGranted", "LeaseReleased"] * (n + 1)  # never two holders at once
    grants = [e for e in log if e["type"] == "LeaseGranted"][1:]
    assert [g["data"]["session_id"] for g in grants] == started
    assert all(g["data"]["handed_off"] is True for g in grants)
    assert [g["data"]["fencing_token"] for g in grants] == list(range(2, n + 2))
    assert (await first.get("/v1/waits"))["waits"] == []


async def test_twenty_waiters_are_handed_one_issue_in_fifo_order(api: Api) -> None:
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 50})
    await _fifo_round([api])


@pytest.mark.postgres
async def test_fifo_hand_off_across_two_server_processes(start_server: Callable[..., ServerProcess]) -> None:
    one, two = start_server(), start_server()
    a, b = Api(one.base_url), Api(two.base_url)
    try:
        await a.ok({"type": "configure_project", "project": "P", "wip_limit": 50})
        await _fifo_round([a, b])
    finally:
        await a.close()
        await b.close()


async def test_wait_cancel_and_stale_waiter_dropped(db_url: str, start_server: Callable[..., ServerProcess]) -> None:
    api = Api(start_server(ttl_seconds=1, test_clock=True).base_url)
    try:
        h = await api.register(actor="h")
        w1, w2 = await api.register(actor="w1"), await api.register(actor="w2")
        await api.ok({"type": "claim_issue", "session_id": h, "project": "P", "issue": "I"})
        err = await api.error(
            {"type": "claim_issue", "session_id": w1, "project": "P", "issue": "I", "wait": True}, 409, "ISSUE_HELD"
        )
        assert err["details"]["waiting"] == {"place": 1, "waiters": 1}
        err = await api.error(
            {"type": "claim_issue", "session_id": w2, "project": "P", "issue": "I", "wait": True}, 409, "ISSUE_HELD"
        )
        assert err["details"]["waiting"] == {"place": 2, "waiters": 2}
        # waiting again keeps the place and appends nothing
        again = await api.command({"type": "claim_issue", "session_id": w2, "project": "P", "issue": "I", "wait": True})
        assert again.json()["error"]["details"]["waiting"]["place"] == 2
        await api.ok({"type": "cancel_wait", "session_id": w2, "issue": "I"})
        await api.error({"type": "cancel_wait", "session_id": w2, "issue": "I"}, 409, "NOT_HOLDER")
        assert [w["session_id"] for w in (await api.get("/v1/waits"))["waits"]] == [w1]
        # w1 goes stale while h stays live (h beats between two steps of the clock, each
        # under the TTL); h's release drops w1 instead of granting it
        for _ in range(2):
            await api.ok({"type": "heartbeat_agent", "session_id": h})
            await advance_clock(db_url, 0.6)
        await api.ok({"type": "heartbeat_agent", "session_id": h})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (await api.agents(live="true")).get(w1):
            await api.ok({"type": "heartbeat_agent", "session_id": h})
            await asyncio.sleep(0.2)
        released = await api.ok({"type": "release_issue", "session_id": h, "issue": "I"})
        assert released["handed_off_to"] is None
        dropped = await api.events("WaitAbandoned")
        assert [(e["data"]["session_id"], e["data"]["reason"]) for e in dropped] == [(w2, "cancelled"), (w1, "stale")]
        assert (await api.get("/v1/waits"))["waits"] == []
    finally:
        await api.close()


async def test_three_session_cycle_is_refused(api: Api) -> None:
    a, b, c = [await api.register(actor=x) for x in "abc"]
    for s, issue in ((a, "A"), (b, "B"), (c, "C")):
        await api.ok({"type": "claim_issue", "session_id": s, "project": "P", "issue": issue})
    await api.error(
        {"type": "claim_issue", "session_id": a, "project": "P", "issue": "B", "wait": True}, 409, "ISSUE_HELD"
    )
    await api.error(
        {"type": "claim_issue", "session_id": b, "project": "P", "issue": "C", "wait": True}, 409, "ISSUE_HELD"
    )
    err = await api.error(
        {"type": "claim_issue", "session_id": c, "project": "P", "issue": "A", "wait": True}, 409, "DEADLOCK"
    )
    cycle: list[dict[str, Any]] = err["details"]["cycle"]
    assert [(x["session_id"], x["key"], x["holder_session_id"]) for x in cycle] == [
        (c, "A", a),
        (a, "B", b),
        (b, "C", c),
    ]
    refused = await api.events("DeadlockRefused")
    assert len(refused) == 1 and refused[0]["data"]["cycle"] == cycle
    assert sorted(w["session_id"] for w in (await api.get("/v1/waits"))["waits"]) == sorted([a, b])


async def test_a_slot_of_a_capacity_lease_is_a_deadlock_only_when_every_holder_waits_for_me(api: Api) -> None:
    """A named lease of capacity 2: waiting for it needs any one slot. While one holder
    waits for the caller and the other is free to release, the wait is no deadlock; once
    both wait for the caller, it is one."""
    a, b, c = [await api.register(actor=x) for x in "abc"]
    for s in (a, b):
        await api.ok({"type": "acquire_lease", "session_id": s, "name": "gpu", "capacity": 2})
    for issue in ("I-1", "I-2"):
        await api.ok({"type": "claim_issue", "session_id": c, "project": "P", "issue": issue})
    await api.error(  # a holds 1 of the 2 slots and waits for c
        {"type": "claim_issue", "session_id": a, "project": "P", "issue": "I-1", "wait": True}, 409, "ISSUE_HELD"
    )
    err = await api.error(
        {"type": "acquire_lease", "session_id": c, "name": "gpu", "capacity": 2, "wait": True}, 409, "LEASE_HELD"
    )
    assert err["details"]["waiting"] == {"place": 1, "waiters": 1}  # b may release its slot
    await api.ok({"type": "cancel_wait", "session_id": c, "name": "gpu"})

    await api.error(  # now b waits for c as well: no slot can ever free for c
        {"type": "claim_issue", "session_id": b, "project": "P", "issue": "I-2", "wait": True}, 409, "ISSUE_HELD"
    )
    err = await api.error(
        {"type": "acquire_lease", "session_id": c, "name": "gpu", "capacity": 2, "wait": True}, 409, "DEADLOCK"
    )
    cycle = [(x["session_id"], x["kind"], x["key"], x["holder_session_id"]) for x in err["details"]["cycle"]]
    assert cycle == [(c, "lease", "gpu", a), (a, "issue", "I-1", c)]
    assert [e["data"]["session_id"] for e in await api.events("DeadlockRefused")] == [c]


async def test_a_waiter_for_a_lease_with_a_free_slot_is_not_deadlocked(api: Api) -> None:
    """A slot that expired is free (nothing sweeps: the line's next look hands it out), so
    the session waiting for that lease is stuck behind nobody."""
    a, b, c = [await api.register(actor=x) for x in "abc"]
    await api.ok({"type": "acquire_lease", "session_id": a, "name": "gpu", "capacity": 2})
    await api.ok({"type": "acquire_lease", "session_id": b, "name": "gpu", "capacity": 2, "ttl_seconds": 1})
    await api.ok({"type": "claim_issue", "session_id": c, "project": "P", "issue": "I-1"})
    await api.error(
        {"type": "acquire_lease", "session_id": c, "name": "gpu", "capacity": 2, "wait": True}, 409, "LEASE_HELD"
    )
    deadline = time.monotonic() + 30
    while any(x["session_id"] == b and x["held"] for x in (await api.get("/v1/named-leases"))["leases"]):
        assert time.monotonic() < deadline, "b's one-second slot never expired"
        await asyncio.sleep(0.1)
    err = await api.error(  # a holds the one live slot; c could take the free one
        {"type": "claim_issue", "session_id": a, "project": "P", "issue": "I-1", "wait": True}, 409, "ISSUE_HELD"
    )
    assert err["details"]["waiting"]["place"] == 1


async def test_files_wait_is_handed_the_paths_when_the_holder_releases(api: Api) -> None:
    h, w = await api.register(actor="h"), await api.register(actor="w")
    await api.ok({"type": "claim_files", "session_id": h, "issue": "I-1", "paths": ["src/"]})
    err = await api.error(
        {"type": "claim_files", "session_id": w, "issue": "I-2", "paths": ["src/a.py", "docs/x.md"], "wait": True},
        409,
        "FILES_CLAIMED",
    )
    assert err["details"]["waiting"] == {"place": 1, "waiters": 1}
    waits = (await api.get("/v1/waits"))["waits"]
    assert [(x["kind"], x["key"], x["session_id"], x["place"]) for x in waits] == [
        ("files", "docs/x.md", w, 1),
        ("files", "src/a.py", w, 1),
    ]
    await api.ok({"type": "release_files", "session_id": h, "issue": "I-1"})
    claims = (await api.get("/v1/file-claims"))["file_claims"]
    assert sorted((c["path"], c["session_id"]) for c in claims) == [("docs/x.md", w), ("src/a.py", w)]
    granted = [e for e in await api.events("FilesClaimed") if e["data"]["session_id"] == w]
    assert len(granted) == 1 and granted[0]["data"]["handed_off"] is True
    msgs = (await api.get("/v1/messages", channel=f"agent:{w}"))["messages"]
    assert any("are yours now" in m["body"] for m in msgs)
    assert (await api.get("/v1/waits"))["waits"] == []


async def test_lease_wait_and_end_of_holder_hands_it_off(api: Api) -> None:
    h, w = await api.register(actor="h"), await api.register(actor="w")
    await api.ok({"type": "acquire_lease", "session_id": h, "name": "dispatcher"})
    err = await api.error(
        {"type": "acquire_lease", "session_id": w, "name": "dispatcher", "wait": True}, 409, "LEASE_HELD"
    )
    assert err["details"]["waiting"] == {"place": 1, "waiters": 1}
    await api.ok({"type": "end_agent", "session_id": h})
    rows = [x for x in (await api.get("/v1/named-leases"))["leases"] if x["held"]]
    assert [(x["name"], x["session_id"], x["fencing_token"]) for x in rows] == [("dispatcher", w, 2)]
    acquired = await api.events("NamedLeaseAcquired")
    assert [e["data"].get("handed_off", False) for e in acquired] == [False, True]


async def test_a_capacity_three_slot_never_has_a_fourth_holder_under_a_race(api: Api) -> None:
    sids = [await api.register(actor=f"r{i}") for i in range(12)]
    race = await asyncio.gather(
        *(
            api.command({"type": "acquire_lease", "session_id": s, "name": "gpu", "capacity": 3, "ttl_seconds": 600})
            for s in sids
        )
    )
    assert sorted(r.status_code for r in race) == [200] * 3 + [409] * 9
    assert {r.json()["error"]["code"] for r in race if r.status_code == 409} == {"LEASE_HELD"}
    held = [x for x in (await api.get("/v1/named-leases"))["leases"] if x["held"]]
    assert len(held) == 3 and len({x["fencing_token"] for x in held}) == 3 and {x["capacity"] for x in held} == {3}
    await api.error({"type": "acquire_lease", "session_id": sids[0], "name": "gpu", "capacity": 2}, 422, "VALIDATION")
    # the losers wait; releases and new racers never push the holders past three
    losers = [s for s, r in zip(sids, race, strict=True) if r.status_code == 409]
    winners = [s for s, r in zip(sids, race, strict=True) if r.status_code == 200]
    await asyncio.gather(
        *(
            api.command({"type": "acquire_lease", "session_id": s, "name": "gpu", "wait": True, "ttl_seconds": 600})
            for s in losers
        )
    )
    for s in winners:
        await api.ok({"type": "release_lease", "session_id": s, "name": "gpu"})
    held = [x for x in (await api.get("/v1/named-leases"))["leases"] if x["held"]]
    assert len(held) == 3 and {x["session_id"] for x in held}.isdisjoint(winners)
    acquired = await api.events("NamedLeaseAcquired")
    assert len(acquired) == 6 and len({e["data"]["fencing_token"] for e in acquired}) == 6


async def test_agent_wip_limit_is_recorded_as_a_denial(api: Api) -> None:
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 10, "agent_wip_limit": 1})
    s = await api.register(actor="s")
    await api.ok({"type": "claim_issue", "session_id": s, "project": "P", "issue": "P-1"})
    err = await api.error(
        {"type": "claim_issue", "session_id": s, "project": "P", "issue": "P-2"}, 409, "AGENT_WIP_CAP_REACHED"
    )
    assert err["details"] == {"project": "P", "limit": 1, "held": 1}
    denied = await api.events("WipCapDenied")
    assert [(e["data"]["scope"], e["data"]["limit"], e["data"]["live_count"]) for e in denied] == [("agent", 1, 1)]


async def test_lock_delay_holds_a_superseded_issue_back_from_others(api: Api) -> None:
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 10, "lock_delay_seconds": 3600})
    a = await api.register(actor="a")
    boss = await api.register(actor="boss", kind="human")
    other = await api.register(actor="other")
    await api.ok({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-1"})
    await api.ok(
        {"type": "claim_issue", "session_id": boss, "project": "P", "issue": "P-1", "force": True}
    )  # immediate
    await api.ok({"type": "release_issue", "session_id": boss, "issue": "P-1"})
    err = await api.error(
        {"type": "claim_issue", "session_id": other, "project": "P", "issue": "P-1"}, 409, "ISSUE_HELD"
    )
    assert err["details"]["reason"] == "lock_delay" and err["details"]["until"].endswith("Z")


async def test_a_rebuild_reproduces_the_lines_slots_and_hand_offs(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    server = start_server()
    api = Api(server.base_url)
    reads = ("/v1/waits", "/v1/named-leases", "/v1/leases", "/v1/file-claims")
    try:
        await api.ok(
            {
                "type": "configure_project",
                "project": "P",
                "wip_limit": 10,
                "lock_delay_seconds": 60,
                "agent_wip_limit": 2,
            }
        )
        s = [await api.register(actor=f"r{i}") for i in range(5)]
        await api.ok({"type": "claim_issue", "session_id": s[0], "project": "P", "issue": "I"})
        await api.command({"type": "claim_issue", "session_id": s[1], "project": "P", "issue": "I", "wait": True})
        await api.command({"type": "claim_issue", "session_id": s[2], "project": "P", "issue": "I", "wait": True})
        await api.ok({"type": "claim_files", "session_id": s[3], "issue": "F", "paths": ["src/"]})
        await api.command(
            {"type": "claim_files", "session_id": s[4], "issue": "G", "paths": ["src/x.py"], "wait": True}
        )
        for sid in (s[0], s[1], s[3]):
            await api.command(
                {
                    "type": "acquire_lease",
                    "session_id": sid,
                    "name": "db",
                    "capacity": 2,
                    "ttl_seconds": 600,
                    "wait": True,
                }
            )
        await api.ok({"type": "release_issue", "session_id": s[0], "issue": "I"})  # hands I to s[1]
        await api.ok({"type": "release_lease", "session_id": s[0], "name": "db"})  # hands a slot to s[3]
        await api.ok({"type": "cancel_wait", "session_id": s[4], "issue": "G", "paths": ["src/x.py"]})
        before = [await api.get(path) for path in reads]
        assert [w["session_id"] for w in before[0]["waits"]] == [s[2]]
        assert sorted(x["session_id"] for x in before[1]["leases"] if x["held"]) == sorted([s[1], s[3]])
    finally:
        await api.close()
    server.stop()
    done = run_cli("rebuild", "--db", db_url)
    assert done.returncode == 0, done.stderr
    again = Api(start_server().base_url)
    try:
        assert [await again.get(path) for path in reads] == before
    finally:
        await again.close()


async def test_the_waiting_lines_are_paged_by_key_then_place(api: Api) -> None:
    """``limit`` rows at a time, ``next`` leading on; pages join into exactly the whole answer,
    places going on across a page that ends inside a line; a cursor not handed out is 422."""
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 50})
    holder = await api.register(actor="holder")
    for issue in ("A-1", "B-1", "C-1"):
        await api.ok({"type": "claim_issue", "session_id": holder, "project": "P", "issue": issue})
    await api.ok({"type": "claim_files", "session_id": holder, "issue": "A-1", "paths": ["src/"]})
    await api.ok({"type": "acquire_lease", "session_id": holder, "name": "gpu"})
    waits: list[dict[str, Any]] = [
        {"type": "claim_issue", "project": "P", "issue": issue} for issue in ("B-1", "A-1", "C-1", "A-1", "B-1")
    ]
    waits += [{"type": "claim_issue", "project": "P", "issue": "A-1"}] * 3
    waits += [{"type": "claim_files", "issue": "F-1", "paths": ["src/a.py", "src/b.py"]}] * 2
    waits += [{"type": "acquire_lease", "name": "gpu"}] * 2
    for i, body in enumerate(waits):
        sid = await api.register(actor=f"w{i}")
        r = await api.command({**body, "session_id": sid, "wait": True})
        assert r.status_code == 409 and "waiting" in r.json()["error"]["details"], r.text

    whole = await api.get("/v1/waits")
    assert whole["next"] is None and len(whole["waits"]) == 14
    lines = [(w["key"], w["kind"], w["place"]) for w in whole["waits"]]
    assert lines == sorted(lines)  # by key, then kind, then place
    assert [w["place"] for w in whole["waits"] if w["key"] == "A-1"] == [1, 2, 3, 4, 5]

    for limit in (1, 3, 4, 13, 14):
        pages: list[list[dict[str, Any]]] = []
        after: str | None = None
        while True:
            page = await api.get("/v1/waits", limit=limit, **({"after": after} if after else {}))
            assert len(page["waits"]) <= limit
            pages.append(page["waits"])
            after = page["next"]
            if after is None:
                break
        assert all(len(p) == limit for p in pages[:-1]) and pages[-1], [len(p) for p in pages]
        assert [w for p in pages for w in p] == whole["waits"], limit

    r = await api.http.get("/v1/waits", params={"after": "not-a-cursor"})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "after", r.text
    r = await api.http.get("/v1/waits", params={"limit": 0})
    assert r.status_code == 422, r.text
