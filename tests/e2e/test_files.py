"""File claims, conflicts, messages and the heatmap over HTTP against real servers."""

from __future__ import annotations

import asyncio
import itertools
import random
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from tests.helpers import Api, ServerProcess, advance_clock

from eventcoord.domain.paths import overlaps


def claim(sid: str | None, issue: str, *paths: str, **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "claim_files", "issue": issue, "paths": list(paths), **kw}
    if sid is not None:
        body["session_id"] = sid
    return body


async def live_claims(api: Api, **filters: Any) -> list[tuple[str, str, str | None]]:
    rows = (await api.get("/v1/file-claims", **filters))["file_claims"]
    return [(r["path"], r["issue"], r["session_id"]) for r in rows]


async def test_every_invalid_path_kind_is_422_naming_the_index(api: Api) -> None:
    s = await api.register(actor="alice")
    invalid = {
        "empty": "",
        "absolute": "/etc/passwd",
        "dotdot": "src/../secret",
        "control_char": "a\x00b",
        "too_long": "x" * 1025,
        "too_many_wildcards": "/".join(["*"] * 17),
    }
    for reason, bad in invalid.items():
        for cmd in (
            claim(s, "I-1", "ok.py", "fine/", bad),
            {"type": "release_files", "session_id": s, "issue": "I-1", "paths": ["ok", "ok2", bad]},
        ):
            err = await api.error(cmd, 422, "VALIDATION")
            assert err["details"]["field"] == "paths[2]", (reason, err)
            assert err["details"].get("reason", reason) == reason
    for bad in ("a\nb", "a\x7fb", "a\x85b"):
        assert (await api.error(claim(s, "I-1", bad), 422, "VALIDATION"))["details"]["field"] == "paths[0]"
    await api.error(claim(s, "I-1", *[f"f{i}" for i in range(101)]), 422, "VALIDATION")
    assert await live_claims(api) == []
    # normalisation: ./ and // collapse, and the normalised form is what is held
    got = await api.ok(claim(s, "I-1", ".//src//./a.py", "lib/."))
    assert got["claimed"] == ["src/a.py", "lib/"]
    assert await live_claims(api) == [("src/a.py", "I-1", s), ("lib/", "I-1", s)]
    # 100 paths of 1,024 characters and ~500 segments each are valid, and decided
    deep = [f"d{i:02d}/" + "a/" * 509 + "f" for i in range(100)]
    assert max(map(len, deep)) <= 1024
    assert len((await api.ok(claim(s, "I-2", *deep)))["claimed"]) == 100
    await api.error(claim(await api.register(), "I-3", deep[7]), 409, "FILES_CLAIMED")


OVERLAP_CASES = [
    # held, requested, held exclusive, requested exclusive, conflict
    ("src/", "src/deep/a.py", True, True, True),  # directory vs file
    ("src/a.py", "src/", True, True, True),  # file vs directory
    ("src/**/*.py", "src/x/y/a.py", True, True, True),  # glob vs file
    ("src/*.py", "src/**/a.p?", True, True, True),  # glob vs glob
    ("*", "README.md", True, True, True),
    ("*", "src/a.py", True, True, False),  # * never matches /
    ("src/*.py", "src/*.rs", True, True, False),
    ("src/a.py", "src/a.py.bak", True, True, False),
    ("src/", "src/a.py", False, False, False),  # shared vs shared
    ("src/", "src/a.py", False, True, True),  # shared vs exclusive
    ("src/", "src/a.py", True, False, True),  # exclusive vs shared
]


async def test_overlap_not_string_equality(api: Api) -> None:
    a, b = await api.register(actor="alice"), await api.register(actor="bob")
    expected_conflicts = 0
    for i, (held, requested, held_exclusive, requested_exclusive, conflict) in enumerate(OVERLAP_CASES):
        await api.ok(claim(a, f"A-{i}", f"case{i}/{held}", exclusive=held_exclusive))
        r = await api.command(claim(b, f"B-{i}", f"case{i}/{requested}", exclusive=requested_exclusive))
        assert r.status_code == (409 if conflict else 200), (held, requested, r.text)
        expected_conflicts += conflict
        assert len(await api.events("ClaimConflict")) == expected_conflicts


async def test_conflict_is_all_or_nothing_with_details_and_events(api: Api) -> None:
    a, b = await api.register(actor="alice"), await api.register(actor="bob")
    await api.ok(claim(a, "A-1", "src/", "docs/*.md"))
    await api.ok(claim(None, "ADMIN-1", "Makefile"))  # session-less (admin token)
    before = (await api.get("/v1/events", limit=1000))["events"][-1]["position"]
    err = await api.error(
        claim(b, "B-1", "free/x.py", "src/main.py", "docs/README.md", "Makefile"), 409, "FILES_CLAIMED"
    )
    assert err["details"] == {
        "conflicts": [
            {
                "path": "src/main.py",
                "holder_path": "src/",
                "holder_issue": "A-1",
                "holder_session_id": a,
                "holder_actor_key": "alice",
            },
            {
                "path": "docs/README.md",
                "holder_path": "docs/*.md",
                "holder_issue": "A-1",
                "holder_session_id": a,
                "holder_actor_key": "alice",
            },
            {
                "path": "Makefile",
                "holder_path": "Makefile",
                "holder_issue": "ADMIN-1",
                "holder_session_id": None,
                "holder_actor_key": "token:admin",
            },
        ]
    }
    after = [e for e in await api.events() if e["position"] > before]
    assert [e["type"] for e in after] == ["ClaimConflict"] * 3  # nothing else written
    assert [e["data"]["path"] for e in after] == ["src/main.py", "docs/README.md", "Makefile"]
    assert all(
        e["data"]["forced"] is False and e["data"]["issue"] == "B-1" and e["data"]["session_id"] == b for e in after
    )
    assert after[0]["data"]["holder_session_id"] == a and after[0]["data"]["holder_issue"] == "A-1"
    assert ("free/x.py", "B-1", b) not in await live_claims(api)
    logged = (await api.get("/v1/conflicts"))["conflicts"]
    assert [(c["path"], c["holder_path"], c["forced"]) for c in logged] == [
        (e["data"]["path"], e["data"]["holder_path"], False) for e in after
    ]
    # own claims never conflict; an identical re-claim appends nothing
    same = await api.command(claim(a, "A-1", "src/", "src/sub/x.py"))
    assert same.status_code == 200 and [e["type"] for e in same.json()["events"]] == ["FilesClaimed"]
    again = await api.command(claim(a, "A-1", "src/", "src/sub/x.py"))
    assert again.json()["events"] == [] and again.json()["result"]["claimed"] == ["src/", "src/sub/x.py"]


async def test_force_overrides_and_tells_both_sides(api: Api) -> None:
    agent = Api(api.http.base_url.__str__(), (await api.ok({"type": "issue_token", "role": "agent"}))["token"])
    try:
        a, b = await agent.register(actor="alice"), await agent.register(actor="bob")
        await agent.ok(claim(a, "A-1", "src/", "README.md"))
        got = await agent.ok(claim(b, "B-1", "src/**/*.py", "notes.txt", force=True))
        assert got["overridden"] == [
            {
                "path": "src/**/*.py",
                "holder_path": "src/",
                "holder_issue": "A-1",
                "holder_session_id": a,
                "holder_actor_key": "alice",
            }
        ]
        types = [e["type"] for e in await api.events()]
        assert types[-5:] == ["FileClaimReleased", "ClaimConflict", "FilesClaimed", "MessagePosted", "MessagePosted"]
        released = (await api.events("FileClaimReleased"))[-1]["data"]
        assert (released["reason"], released["session_id"], released["paths"], released["by_session_id"]) == (
            "overridden",
            a,
            ["src/"],
            b,
        )
        conflict = (await api.events("ClaimConflict"))[-1]["data"]
        assert conflict["forced"] is True and conflict["holder_session_id"] == a
        on_issue = (await agent.get("/v1/messages", channel="issue:B-1"))["messages"]
        assert len(on_issue) == 1 and "A-1" in on_issue[0]["body"] and on_issue[0]["session_id"] == b
        to_alice = (await agent.get("/v1/messages", channel=f"agent:{a}"))["messages"]
        assert len(to_alice) == 1
        assert all(word in to_alice[0]["body"] for word in ("src/", "B-1", b))
        assert sorted(await live_claims(api)) == sorted(
            [("README.md", "A-1", a), ("src/**/*.py", "B-1", b), ("notes.txt", "B-1", b)]
        )
        assert await live_claims(api, session=a) == [("README.md", "A-1", a)]
        assert await live_claims(api, issue="B-1", prefix="src") == [("src/**/*.py", "B-1", b)]
    finally:
        await agent.close()


async def test_stale_holders_are_reclaimed_silently_sessionless_claims_are_not(
    start_server: Callable[..., ServerProcess], db_url: str
) -> None:
    server = start_server(ttl_seconds=1, test_clock=True)
    api = Api(server.base_url)
    try:
        dead = await api.register(actor="crashed")
        await api.ok(claim(dead, "D-1", "src/", "lib/a.py"))
        await api.ok(claim(None, "H-1", "docs/"))  # a person's claim: no session, no liveness
        await advance_clock(db_url, 1.5)
        fresh = await api.register(actor="fresh")
        rows = (await api.get("/v1/file-claims"))["file_claims"]
        assert {r["path"]: r["live"] for r in rows} == {"src/": False, "lib/a.py": False, "docs/": True}
        got = await api.ok(claim(fresh, "F-1", "src/app.py"))
        assert got["expired"] == [{"holder_path": "src/", "holder_issue": "D-1", "holder_session_id": dead}]
        released = await api.events("FileClaimReleased")
        assert [(e["data"]["reason"], e["data"]["paths"], e["data"]["by_session_id"]) for e in released] == [
            ("expired", ["src/"], fresh)
        ]
        assert await api.events("ClaimConflict") == []
        assert (await api.get("/v1/conflicts"))["conflicts"] == []
        # the session-less claim outlives every TTL and yields only to force
        await api.error(claim(fresh, "F-1", "docs/guide.md"), 409, "FILES_CLAIMED")
        await api.ok(claim(fresh, "F-1", "docs/guide.md", force=True))
        assert (await api.events("FileClaimReleased"))[-1]["data"]["reason"] == "overridden"
        # a stale claiming session is refused
        await advance_clock(db_url, 1.2)
        await api.error(claim(fresh, "F-1", "other"), 409, "SESSION_NOT_LIVE")
        await api.ok({"type": "end_agent", "session_id": fresh})
    finally:
        await api.close()
    # a rebuild from position 0 reproduces the files tier's read models exactly
    server.stop()
    before = await dump_read_models(db_url)
    assert len(before["file_claims"]) == 5 and len(before["conflicts"]) == 2 and len(before["messages"]) == 1
    rebuilt = subprocess.run(
        [sys.executable, "-m", "eventcoord.cli", "rebuild", "--db", db_url], capture_output=True, text=True, timeout=60
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert await dump_read_models(db_url) == before


async def dump_read_models(db_url: str) -> dict[str, list[Any]]:
    from sqlalchemy import Connection, select

    from eventcoord.projections.tables import conflicts, file_claims, messages
    from eventcoord.store import open_store

    def run(conn: Connection) -> dict[str, list[Any]]:
        return {
            t.name: [tuple(r) for r in conn.execute(select(t).order_by(*t.primary_key.columns))]
            for t in (file_claims, conflicts, messages)
        }

    store = open_store(db_url)
    await store.start()
    try:
        return await store.query(run)
    finally:
        await store.close()


async def test_release_files_and_end_agent(api: Api) -> None:
    a = await api.register(actor="alice")
    await api.ok(claim(a, "A-1", "src/", "lib/a.py", "lib/b.py"))
    await api.ok(claim(a, "A-2", "docs/"))
    await api.ok(claim(None, "A-1", "admin.txt"))
    assert (await api.ok({"type": "release_files", "session_id": a, "issue": "A-1", "paths": ["./lib//a.py", "nope"]}))[
        "released"
    ] == ["lib/a.py"]
    assert (await api.ok({"type": "release_files", "session_id": a, "issue": "A-1"}))["released"] == [
        "src/",
        "lib/b.py",
    ]
    assert (await api.ok({"type": "release_files", "session_id": a, "issue": "A-1"}))["released"] == []
    await api.ok(claim(a, "A-1", "src/x.py"))
    ended = await api.ok({"type": "end_agent", "session_id": a})
    assert sorted(ended["released_claims"]) == ["docs/", "src/x.py"]
    last = [e["data"] for e in await api.events("FileClaimReleased")][-2:]
    assert sorted((e["issue"], e["reason"]) for e in last) == [("A-1", "agent_ended"), ("A-2", "agent_ended")]
    assert await live_claims(api) == [("admin.txt", "A-1", None)]
    await api.error(claim(a, "A-3", "x"), 409, "SESSION_NOT_LIVE")
    assert (await api.ok({"type": "release_files", "issue": "A-1"}))["released"] == ["admin.txt"]
    assert await live_claims(api) == []


async def test_messages_in_order_with_after(api: Api) -> None:
    a = await api.register(actor="alice")
    positions = []
    for i in range(5):
        r = await api.command({"type": "post_message", "session_id": a, "channel": "project:P", "body": f"m{i}\x07\n"})
        assert r.status_code == 200
        positions.append(r.json()["position"])
    await api.ok({"type": "post_message", "channel": "issue:X-1", "body": "elsewhere"})
    got = (await api.get("/v1/messages", channel="project:P"))["messages"]
    assert [m["body"] for m in got] == [f"m{i}\n" for i in range(5)]
    assert [m["position"] for m in got] == positions
    assert {m["session_id"] for m in got} == {a} and all(m["recorded_at"].endswith("Z") for m in got)
    tail = (await api.get("/v1/messages", channel="project:P", after=positions[1]))["messages"]
    assert [m["body"] for m in tail] == ["m2\n", "m3\n", "m4\n"]
    assert len((await api.get("/v1/messages", channel="project:P", limit=2))["messages"]) == 2
    await api.ok({"type": "post_message", "session_id": a, "channel": f"agent:{a}", "body": "to myself"})
    await api.error({"type": "post_message", "channel": "agent:s-nobody", "body": "x"}, 404, "NOT_FOUND")
    await api.error({"type": "post_message", "channel": "room:1", "body": "x"}, 422, "VALIDATION")
    r = await api.http.get("/v1/messages", params={"channel": "nope"})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "channel"


async def test_a_heatmap_bucket_says_whether_it_is_a_file_or_a_folder(api: Api) -> None:
    """A root file is a leaf (nothing to drill into); a directory claim, a deeper path or a
    glob below the bucket makes it a folder; a bucket mixing both is a folder."""
    sid = await api.register(actor="a")
    paths = ("README.md", "docs/", "src/core/x.py", "tests/**/*.py", "Makefile", "Makefile/x")
    await api.ok(claim(sid, "L-1", *paths))

    def leaves(body: dict[str, Any]) -> dict[str, bool]:
        return {b["prefix"]: b["leaf"] for b in body["buckets"]}

    for mode in ("claims", "contention"):
        if mode == "contention":
            other = await api.register(actor="b")
            for path in paths:
                await api.error(claim(other, "L-2", path), 409, "FILES_CLAIMED")
        assert leaves(await api.get("/v1/heatmap", mode=mode)) == {
            "README.md": True,
            "docs": False,
            "src": False,
            "tests": False,
            "Makefile": False,  # a file and a folder at once: drillable
        }
        assert leaves(await api.get("/v1/heatmap", mode=mode, depth=2)) == {
            "README.md": True,
            "docs": False,  # the directory claim itself
            "src/core": False,
            "tests/**": False,
            "Makefile": True,  # the file alone, now that Makefile/x has a bucket of its own
            "Makefile/x": True,
        }
        assert leaves(await api.get("/v1/heatmap", mode=mode, prefix="src", depth=3)) == {"src/core/x.py": True}


async def test_conflicts_and_heatmap_windows_prefixes_and_depth(api: Api) -> None:
    holder, other = await api.register(actor="holder"), await api.register(actor="other")
    await api.ok(claim(holder, "H-1", "src/core/", "src/ui/app.ts", "docs/a.md"))
    for paths in (["src/core/x.py"], ["src/core/y.py", "src/ui/app.ts"], ["docs/a.md"]):
        await api.error(claim(other, "O-1", *paths), 409, "FILES_CLAIMED")
    log = (await api.get("/v1/conflicts"))["conflicts"]
    assert [c["path"] for c in log] == ["src/core/x.py", "src/core/y.py", "src/ui/app.ts", "docs/a.md"]
    assert (await api.get("/v1/conflicts", prefix="src/core"))["conflicts"] == log[:2]
    assert (await api.get("/v1/conflicts", after=log[1]["position"], limit=1))["conflicts"] == [log[2]]
    t2, t3 = log[1]["occurred_at"], log[3]["occurred_at"]
    assert [c["path"] for c in (await api.get("/v1/conflicts", since=t2, until=t3))["conflicts"]] == [
        "src/core/y.py",
        "src/ui/app.ts",
    ]

    def buckets(body: dict[str, Any]) -> list[tuple[str, int]]:
        return [(b["prefix"], b["count"]) for b in body["buckets"]]

    contention = await api.get("/v1/heatmap", mode="contention")
    assert contention["mode"] == "contention" and buckets(contention) == [("src", 3), ("docs", 1)]
    assert buckets(await api.get("/v1/heatmap", mode="contention", depth=2)) == [
        ("src/core", 2),
        ("docs/a.md", 1),
        ("src/ui", 1),
    ]
    assert buckets(await api.get("/v1/heatmap", mode="contention", prefix="src", depth=3)) == [
        ("src/core/x.py", 1),
        ("src/core/y.py", 1),
        ("src/ui/app.ts", 1),
    ]
    assert buckets(await api.get("/v1/heatmap", mode="contention", since=t2, until=t3)) == [("src", 2)]
    assert (
        buckets(
            await api.get("/v1/heatmap", mode="contention", since="2000-01-01T00:00:00Z", until="2000-01-02T00:00:00Z")
        )
        == []
    )
    claims = await api.get("/v1/heatmap")  # claims mode by default: claimed paths, released or not
    assert claims["mode"] == "claims" and buckets(claims) == [("src", 2), ("docs", 1)]
    await api.ok({"type": "release_files", "session_id": holder, "issue": "H-1"})
    assert buckets(await api.get("/v1/heatmap", mode="claims", depth=2)) == [
        ("docs/a.md", 1),
        ("src/core", 1),
        ("src/ui", 1),
    ]
    for params, field in (
        ({"mode": "hot"}, "mode"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2020-13-01"}, "until"),
        ({"depth": 0}, "depth"),
        ({"prefix": "../x"}, "prefix"),
    ):
        r = await api.http.get("/v1/heatmap", params=params)
        assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION", r.text
        assert r.json()["error"]["details"]["field"] == field, r.text
    r = await api.http.get("/v1/conflicts", params={"since": "nope"})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "since"


PATTERNS = [
    "src/",
    "src/a.py",
    "src/**/*.py",
    "*",
    "src/*.py",
    "lib/",
    "lib/b.rs",
    "**/b.rs",
    "src/x/a.py",
    "docs/*.md",
    "docs/",
    "README.md",
    "[a-z]*.md",
    "src/?.py",
    "lib/**",
    "tests/",
]


def assert_no_overlapping_exclusive(rows: list[dict[str, Any]]) -> None:
    live = [r for r in rows if r["live"]]
    for x, y in itertools.combinations(live, 2):
        if (x["issue"], x["session_id"]) == (y["issue"], y["session_id"]) or not (x["exclusive"] or y["exclusive"]):
            continue
        assert not overlaps(x["path"], y["path"]), (x, y)


async def race(clients: list[Api], rounds: int = 4) -> None:
    """Many sessions claiming overlapping patterns at once, round after round."""
    rng = random.Random(4)
    sessions = [(c, await c.register(actor=f"racer-{i}")) for i, c in enumerate(clients)]
    granted = 0
    for rnd in range(rounds):
        answers = await asyncio.gather(
            *(
                c.command(
                    claim(
                        s,
                        f"R-{i}",
                        *rng.sample(PATTERNS, rng.randint(1, 3)),
                        exclusive=rng.random() < 0.8,
                        force=rnd > 0 and rng.random() < 0.15,
                    )
                )
                for i, (c, s) in enumerate(sessions)
            )
        )
        for r in answers:
            assert r.status_code in (200, 409), r.text
            if r.status_code == 409:
                assert r.json()["error"]["code"] == "FILES_CLAIMED" and r.json()["error"]["details"]["conflicts"]
        granted += sum(r.status_code == 200 for r in answers)
        assert_no_overlapping_exclusive((await clients[0].get("/v1/file-claims"))["file_claims"])
        # half of the sessions let go of everything before the next round
        await asyncio.gather(
            *(
                c.ok({"type": "release_files", "session_id": s, "issue": f"R-{i}"})
                for i, (c, s) in enumerate(sessions)
                if rng.random() < 0.5
            )
        )
    assert granted > 0


async def test_twenty_concurrent_claimers_never_hold_overlapping_exclusive_claims(server: ServerProcess) -> None:
    clients = [Api(server.base_url) for _ in range(20)]
    try:
        await race(clients)
    finally:
        await asyncio.gather(*(c.close() for c in clients))


@pytest.mark.postgres
async def test_the_same_race_across_two_server_processes(start_server: Callable[..., ServerProcess]) -> None:
    one, two = start_server(), start_server()
    clients = [Api((one if i % 2 else two).base_url) for i in range(20)]
    try:
        await race(clients)
    finally:
        await asyncio.gather(*(c.close() for c in clients))
