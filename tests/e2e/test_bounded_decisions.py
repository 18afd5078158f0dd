"""Bounded decisions over HTTP on both backends: a claim_files whose decision would cost
more than its limit is refused (422 VALIDATION naming it) and writes nothing, the issue's
glob attack is refused before any check, and the server keeps answering meanwhile.

Costs are asserted by their refusals and what was written, never by timing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.helpers import Api

from eventcoord.domain.files import CLAIM_WORK_LIMIT
from eventcoord.domain.paths import MAX_PATTERN_CHARS


def claim(sid: str, issue: str, *paths: str) -> dict[str, Any]:
    return {"type": "claim_files", "session_id": sid, "issue": issue, "paths": list(paths)}


def sixteen_stars(run: int, last: str) -> str:
    """The issue's glob: one segment of 16 stars with runs of ``run`` characters between them."""
    return "*" + "*".join(["a" * run] * 15) + "*" + last


async def test_the_glob_attack_is_refused_before_any_check_and_its_kind_at_the_limit_is_decided(api: Api) -> None:
    alice, bob = await api.register(actor="alice"), await api.register(actor="bob")
    head = await api.head()
    # Near the old limit (947 characters): 10 s of checks on one claim before; now refused at once.
    err = await api.error(claim(alice, "A-1", "src/ok.py", sixteen_stars(62, "c")), 422, "VALIDATION")
    assert err["details"] == {"field": "paths[1]", "reason": "too_long"}
    assert str(MAX_PATTERN_CHARS) in err["message"]
    assert await api.head() == head  # nothing recorded
    # The same shape at the limit of a pattern: one held, eight more from another session,
    # decided by their ends (granted: no common file), while /health answers.
    held = sixteen_stars(14, "c")
    assert len(held) <= MAX_PATTERN_CHARS
    await api.ok(claim(alice, "A-1", held))
    eight = [sixteen_stars(14, last) for last in "bdefghij"]
    pending = asyncio.ensure_future(api.command(claim(bob, "B-1", *eight)))
    health = await api.http.get("/health")
    answer = await pending
    assert health.status_code == 200
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["claimed"] == eight


async def test_a_claim_whose_overlap_checks_pass_the_limit_is_refused_and_writes_nothing(api: Api) -> None:
    alice, bob = await api.register(actor="alice"), await api.register(actor="bob")
    # A plain path of 511 names, and patterns whose block of 14 wildcard segments must be
    # tried at every one of them: tens of thousands of steps each.
    deep = "/".join(chr(0x100 + i) for i in range(511)) + "/z"
    await api.ok(claim(alice, "A-1", deep))
    blocks = [
        "**/" + "/".join(f"[{chr(0x200 + i + k)}]" for i in range(14)) + f"/{chr(0x4E00 + k)}/**" for k in range(6)
    ]
    head = await api.head()
    err = await api.error(claim(bob, "B-1", "ok.py", *blocks), 422, "VALIDATION")
    assert err["details"]["reason"] == "too_complex"
    assert err["details"]["field"] in {f"paths[{i}]" for i in range(1, 7)}
    assert f"{CLAIM_WORK_LIMIT:,}" in err["message"]
    assert await api.head() == head  # refused before anything was written
    assert [c["path"] for c in (await api.get("/v1/file-claims"))["file_claims"]] == [deep]
    # One of them alone is decided: the limit is per command, not a ban on the pattern.
    got = await api.ok(claim(bob, "B-1", blocks[0]))
    assert got["claimed"] == [blocks[0]]


async def test_a_claim_that_would_record_ten_thousand_conflicts_is_refused(api: Api) -> None:
    alice, bob = await api.register(actor="alice"), await api.register(actor="bob")
    files = [f"d/a{i:03d}" for i in range(100)]
    await api.ok(claim(alice, "A-1", *files))
    # 100 patterns that each cover all 100 files: 10,000 conflicts, each an event to store.
    covering = [f"d/[a{chr(0x4E00 + k)}]*" for k in range(100)]
    head = await api.head()
    err = await api.error(claim(bob, "B-1", *covering), 422, "VALIDATION")
    assert err["details"]["reason"] == "too_complex"
    assert await api.head() == head
    # A handful of them is refused as usual, each conflict recorded.
    err = await api.error(claim(bob, "B-1", *covering[:3]), 409, "FILES_CLAIMED")
    assert len(err["details"]["conflicts"]) == 300


DEEP = "/".join(chr(0x100 + i) for i in range(511)) + "/z"


def costly(k: int) -> str:
    """A pattern that overlaps nothing DEEP holds but costs about half a decision's steps to tell."""
    return "**/" + "/".join(f"[{chr(0x200 + i + k)}]" for i in range(14)) + f"/{chr(0x4E00 + k)}/**"


async def test_a_hand_off_stops_at_its_limit_and_the_waiter_it_stopped_at_is_told(api: Api) -> None:
    """Six shared waits, each freed by one release; telling each apart from DEEP costs about
    half the steps of a decision. The release is decided within its steps: the first waiter
    is handed its files, the second is told to claim again, and everyone keeps a place."""
    alice = await api.register(actor="alice")
    mine = [f"x/a{k}.py" for k in range(6)]
    await api.ok(claim(alice, "A-1", DEEP, *mine))
    waiters = [await api.register(actor=f"w{k}") for k in range(6)]
    for k, sid in enumerate(waiters):
        body = {**claim(sid, f"W-{k}", mine[k], costly(k)), "exclusive": False, "wait": True}
        await api.error(body, 409, "FILES_CLAIMED")
    released = await api.ok({"type": "release_files", "session_id": alice, "issue": "A-1", "paths": mine})
    assert sorted(released["released"]) == mine
    claims = (await api.get("/v1/file-claims"))["file_claims"]
    assert {c["session_id"] for c in claims} == {alice, waiters[0]}  # the first waiter, and no further
    left = {w["session_id"] for w in (await api.get("/v1/waits"))["waits"]}
    assert left == set(waiters[1:])
    told = (await api.get("/v1/messages", channel=f"agent:{waiters[1]}"))["messages"]
    assert len(told) == 1 and "claim_files again" in told[0]["body"]
    assert (await api.get("/v1/messages", channel=f"agent:{waiters[2]}"))["messages"] == []
    # The waiter told claims again, on its own steps, and has its files.
    again = await api.ok({**claim(waiters[1], "W-1", mine[1], costly(1)), "exclusive": False})
    assert sorted(again["claimed"]) == sorted([mine[1], costly(1)])


async def test_a_pull_passes_over_items_it_cannot_tell_within_its_limit(api: Api) -> None:
    """Items whose paths cost half a decision's steps each to tell apart from a live claim:
    a pull decides within its steps, passing over what it could not tell (as if blocked),
    and still takes an item without paths."""
    alice, bob = await api.register(actor="alice"), await api.register(actor="bob")
    await api.ok(claim(alice, "A-1", DEEP, "x/held.py"))
    for k in range(5):  # each blocked by x/held.py, after a costly look at DEEP
        await api.ok({"type": "enqueue_work", "project": "Q", "priority": 10, "paths": [costly(k), "x/held.py"]})
    await api.ok({"type": "enqueue_work", "project": "Q", "priority": 5, "paths": ["y/free.py"]})
    free = (await api.ok({"type": "enqueue_work", "project": "Q", "priority": 1}))["item_id"]
    got = await api.ok({"type": "claim_next_work", "session_id": bob, "project": "Q"})
    assert got["item"] is not None and got["item"]["item_id"] == free
