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
