"""The dashboard at /ui in a real headless chromium against a real ``eventcoord serve``.

Each test runs on SQLite and on PostgreSQL (fixture ``db_url``) and leaves a screenshot of
its final state under ``tests/artifacts/browser/``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from tests.browser.conftest import PageLog, SyncApi, sign_in, snapshot
from tests.helpers import ServerProcess


@pytest.fixture
def srv(db_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    s = ServerProcess(db_url, tmp_path / "data")
    yield s
    s.stop()


@pytest.fixture
def api(srv: ServerProcess) -> Iterator[SyncApi]:
    a = SyncApi(srv.base_url)
    yield a
    a.close()


def claim(sid: str | None, issue: str, *paths: str, **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "claim_files", "issue": issue, "paths": list(paths), **kw}
    if sid is not None:
        body["session_id"] = sid
    return body


XSS_ACTOR = "<img src=x onerror=window.__xss=1>"
XSS_BODY = "<script>window.__xss=2</script> ship it"


def seed_team(api: SyncApi) -> dict[str, str]:
    """A small, busy workspace: agents, leases, claims, conflicts, queue, messages."""
    alice = api.register("alice", host="build-01", working_on="WEB-7")
    bob = api.register("bob", host="build-02")
    carol = api.register("carol", host="laptop", kind="human")
    api.register(XSS_ACTOR, host="<b>host</b>")
    api.ok({"type": "claim_issue", "session_id": alice, "project": "WEB", "issue": "WEB-7"})
    api.ok({"type": "claim_issue", "session_id": bob, "project": "API", "issue": "API-12"})
    api.ok({"type": "claim_issue", "session_id": carol, "project": "WEB", "issue": "WEB-9"})
    api.ok(claim(alice, "WEB-7", "src/web/app.tsx", "src/web/routes/", "docs/web.md"))
    api.ok(claim(bob, "API-12", "src/api/handlers.py", "src/api/models.py", "migrations/0003.py"))
    api.ok(claim(carol, "WEB-9", "README.md"))
    # Contention: bob and alice step on each other's files.
    api.refused(claim(bob, "API-12", "src/web/app.tsx"), "FILES_CLAIMED")
    api.refused(claim(alice, "WEB-7", "src/api/models.py", "src/api/handlers.py"), "FILES_CLAIMED")
    api.ok({"type": "post_message", "session_id": bob, "channel": "issue:API-12", "body": XSS_BODY})
    api.ok(
        {
            "type": "post_message",
            "session_id": bob,
            "channel": "issue:API-12",
            "body": "models.py is mine until the migration lands",
        }
    )
    api.ok({"type": "enqueue_work", "project": "API", "issue": "API-20", "priority": 5})
    api.ok({"type": "enqueue_work", "project": "API", "issue": "API-21", "priority": 1})
    return {"alice": alice, "bob": bob, "carol": carol}


def test_page_loads_with_every_view_no_console_errors_and_the_token_only_in_headers(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog, request: pytest.FixtureRequest
) -> None:
    ids = seed_team(api)
    reader = api.reader_token()
    page.goto(srv.base_url + "/ui")
    expect(page.locator("#login")).to_be_visible()
    page.locator("#login-token").fill("not-a-token")
    page.locator("#login-form button[type=submit]").click()
    expect(page.locator("#login-error")).to_contain_text("refused")
    page_log.errors.clear()  # the refused check above is a 401 the browser logs; it was asked for
    page.locator("#login-token").fill(reader)
    page.locator("#login-form button[type=submit]").click()
    page.wait_for_selector("body[data-ready='1']", timeout=15_000)

    agents = page.locator("#panel-agents tbody tr")
    expect(agents).to_have_count(4)
    # Untrusted text is shown as text, never run or parsed as HTML.
    expect(page.locator("#panel-agents .actor", has_text=XSS_ACTOR)).to_have_count(1)
    expect(page.locator("#panel-messages .msg-body", has_text=XSS_BODY)).to_have_count(1)
    assert page.evaluate("window.__xss") is None
    assert page.locator("#board img, #board script, #board b").count() == 0
    expect(page.locator(f"#panel-agents tr[data-session='{ids['alice']}']")).to_contain_text("WEB-7")
    expect(page.locator(f"#panel-agents tr[data-session='{ids['carol']}']")).to_contain_text("human")
    leases = page.locator("#panel-leases tbody tr")
    expect(leases).to_have_count(3)
    expect(page.locator("#panel-leases tr[data-issue='WEB-9']")).to_contain_text("human_held")
    expect(page.locator("#panel-leases tr[data-issue='API-12']")).to_contain_text("held")
    expect(page.locator("#panel-leases tr[data-issue='API-12'] .token")).to_have_text("#1")
    expect(page.locator("#panel-claims li.dir[data-prefix='src'] .count")).to_have_text("4")
    expect(page.locator("#panel-claims li.leaf[data-path='README.md']")).to_be_visible()
    page.locator("#panel-claims li.dir[data-prefix='src'] button").click()
    page.locator("#panel-claims li.dir[data-prefix='src/api'] button").click()
    expect(page.locator("#panel-claims li.leaf[data-path='src/api/models.py']")).to_contain_text("API-12")
    expect(page.locator("#panel-queue tbody tr")).to_have_count(2)
    expect(page.locator("#panel-conflicts li.conflict")).to_have_count(3)
    expect(page.locator("#panel-messages li.message").first).to_contain_text("models.py is mine")
    expect(page.locator("#panel-heatmap .tile[data-prefix='src']")).to_be_visible()
    expect(page.locator("#conn")).to_have_text("Live")

    # An agent in depth: its leases (with fencing tokens) and the messages sent to it.
    page.locator(f"#panel-agents tr[data-session='{ids['alice']}']").click()
    drawer = page.locator("#agent-drawer")
    expect(drawer).to_be_visible()
    expect(drawer.locator("li.lease-line[data-issue='WEB-7']")).to_contain_text("#1")
    expect(drawer).to_contain_text("build-01")
    snapshot(page, request, "agent")
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()

    # Asked once: a reload goes straight to the board.
    page.reload()
    page.wait_for_selector("body[data-ready='1']", timeout=15_000)
    expect(page.locator("#login")).to_be_hidden()

    assert page_log.errors == []
    # Nothing left the machine, and the token never appeared in a URL.
    assert page_log.requests and all(u.startswith(srv.base_url + "/") for u in page_log.requests), page_log.requests
    assert not [u for u in page_log.requests if reader in u or "test-bootstrap-token" in u]
    ui = httpx.get(srv.base_url + "/ui")
    assert ui.status_code == 200 and "connect-src 'self'" in ui.headers["content-security-policy"]
    assert httpx.get(srv.base_url + "/ui/js/../../../pyproject.toml").status_code == 404


def test_a_claim_made_through_the_api_appears_without_reload_within_two_seconds(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog
) -> None:
    sid = api.register("dave", host="ci-7")
    sign_in(page, srv.base_url, api.reader_token())
    page.evaluate("window.__same_page = true")
    expect(page.locator("#panel-claims .empty")).to_be_visible()

    api.ok(claim(sid, "OPS-1", "LIVE_CLAIM.md"))
    answered = time.monotonic()
    row = page.locator("#panel-claims li.leaf[data-path='LIVE_CLAIM.md']")
    row.wait_for(state="visible", timeout=2_000)
    assert time.monotonic() - answered < 2.0
    expect(row).to_contain_text("OPS-1")
    expect(row).to_contain_text("dave")
    assert page.evaluate("window.__same_page") is True  # no reload happened
    # The heatmap (claims mode) follows too.
    page.locator("#panel-heatmap .seg[data-mode='claims']").click()
    expect(page.locator("#panel-heatmap .tile[data-prefix='LIVE_CLAIM.md']")).to_be_visible()
    assert page_log.errors == []


def seed_contention(api: SyncApi) -> dict[str, int]:
    """Three teams colliding in src/: 6 conflicts under src/api, 3 under src/web, 1 in docs."""
    owner = api.register("owner")
    api.ok(claim(owner, "CORE-1", "src/api/", "src/web/index.ts", "docs/guide.md"))
    expected = {"src": 0, "docs": 0}
    for n in range(6):
        intruder = api.register(f"api-bot-{n}")
        api.refused(claim(intruder, f"API-{n}", f"src/api/file{n}.py"), "FILES_CLAIMED")
        expected["src"] += 1
    for n in range(3):
        intruder = api.register(f"web-bot-{n}")
        api.refused(claim(intruder, f"WEB-{n}", "src/web/index.ts"), "FILES_CLAIMED")
        expected["src"] += 1
    api.refused(claim(api.register("writer"), "DOC-1", "docs/guide.md"), "FILES_CLAIMED")
    expected["docs"] += 1
    return expected


def test_heatmap_draws_a_seeded_contention_log_and_drills_down(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog, request: pytest.FixtureRequest
) -> None:
    expected = seed_contention(api)
    sign_in(page, srv.base_url, api.reader_token())
    stage = page.locator("#panel-heatmap .treemap")
    src = stage.locator(".tile[data-prefix='src']")
    docs = stage.locator(".tile[data-prefix='docs']")
    expect(src).to_have_attribute("data-count", str(expected["src"]))
    expect(docs).to_have_attribute("data-count", str(expected["docs"]))
    # Drawn as a picture: tile areas follow the counts and every tile has a heat colour.
    src_box, docs_box = src.bounding_box(), docs.bounding_box()
    assert src_box and docs_box and src_box["width"] * src_box["height"] > 5 * docs_box["width"] * docs_box["height"]
    assert "rgb(" in (src.get_attribute("style") or "")

    src.click()  # drill down: prefix src, depth 2
    expect(page.locator("#panel-heatmap .crumbs")).to_contain_text("src")
    expect(stage.locator(".tile[data-prefix='src/api']")).to_have_attribute("data-count", "6")
    expect(stage.locator(".tile[data-prefix='src/web']")).to_have_attribute("data-count", "3")
    expect(stage.locator(".tile[data-prefix='docs']")).to_have_count(0)
    snapshot(page, request, "drilled")

    page.locator("#panel-heatmap .seg[data-mode='claims']").click()
    expect(stage.locator(".tile[data-prefix='src/api']")).to_have_attribute("data-count", "1")
    page.locator("#panel-heatmap .crumb", has_text="root").click()
    expect(stage.locator(".tile[data-prefix='docs']")).to_have_attribute("data-count", "1")
    page.locator("#panel-heatmap .seg[data-mode='contention']").click()
    expect(page.locator("#panel-conflicts li.conflict")).to_have_count(expected["src"] + expected["docs"])
    assert page_log.errors == []


SQUARIFY_CHECK = """async () => {
  const { squarify } = await import('/ui/js/treemap.js');
  const values = [400, 90, 90, 60, 31, 17, 9, 5, 3, 1, 1];
  const rects = squarify(values.map((value, i) => ({ value, i })), 0, 0, 800, 300);
  const total = values.reduce((a, b) => a + b, 0);
  return rects.map((r) => ({ i: r.item.i, x: r.x, y: r.y, w: r.w, h: r.h, share: r.item.value / total }));
}"""


def test_treemap_tiles_fill_the_stage_in_proportion_without_overlap(srv: ServerProcess, page: Any) -> None:
    page.goto(srv.base_url + "/ui")
    rects = page.evaluate(SQUARIFY_CHECK)
    assert sorted(r["i"] for r in rects) == list(range(11))
    for r in rects:
        assert r["x"] >= -1e-6 and r["y"] >= -1e-6 and r["x"] + r["w"] <= 800 + 1e-6 and r["y"] + r["h"] <= 300 + 1e-6
        assert abs(r["w"] * r["h"] - r["share"] * 800 * 300) < 1e-3  # area is the share of the stage
    for a in rects:
        for b in rects:
            if a is not b:
                overlap_w = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
                overlap_h = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
                assert overlap_w <= 1e-6 or overlap_h <= 1e-6
    biggest = next(r for r in rects if r["i"] == 0)
    assert max(biggest["w"], biggest["h"]) / min(biggest["w"], biggest["h"]) < 2.5  # squarified, not a sliver


def test_time_slider_shows_a_released_lease_as_held_at_an_earlier_moment(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog
) -> None:
    """Needs ``as_of`` on /v1/leases (docs/protocol.md#history)."""
    sid = api.register("erin")
    granted = api.ok({"type": "claim_issue", "session_id": sid, "project": "OPS", "issue": "OPS-42"})["position"]
    api.ok({"type": "release_issue", "session_id": sid, "issue": "OPS-42", "reason": "completed"})
    sign_in(page, srv.base_url, api.reader_token())
    expect(page.locator("#panel-leases .empty")).to_be_visible()

    page.locator("#timeline-position").fill(str(granted))
    page.locator("#timeline-position").press("Enter")
    expect(page.locator("body")).to_have_class("travelling")
    row = page.locator("#panel-leases tr[data-issue='OPS-42']")
    expect(row).to_contain_text("held")
    expect(row.locator(".token")).to_have_text("#1")
    expect(page.locator("#asof-warning")).to_be_hidden()

    page.locator("#timeline-live").click()
    expect(page.locator("#panel-leases .empty")).to_be_visible()
    assert page_log.errors == []


def test_reconnects_by_itself_after_a_server_restart_and_says_so_meanwhile(
    db_url: str, tmp_path: Path, page: Any, request: pytest.FixtureRequest
) -> None:
    first = ServerProcess(db_url, tmp_path / "a")
    api = SyncApi(first.base_url)
    second: ServerProcess | None = None
    try:
        sid = api.register("frank")
        reader = api.reader_token()
        sign_in(page, first.base_url, reader)
        expect(page.locator("#conn")).to_have_text("Live")
        first.stop()
        expect(page.locator("#disconnected")).to_be_visible(timeout=10_000)
        expect(page.locator("#disconnected")).to_contain_text("reconnecting")
        expect(page.locator("#conn")).to_have_text("Disconnected")
        snapshot(page, request, "disconnected")

        second = ServerProcess(db_url, tmp_path / "b", port=first.port)  # the same address again
        expect(page.locator("#disconnected")).to_be_hidden(timeout=15_000)
        expect(page.locator("#conn")).to_have_text("Live")
        api.close()
        api = SyncApi(second.base_url)
        api.ok({"type": "heartbeat_agent", "session_id": sid})
        api.ok(claim(sid, "OPS-2", "AFTER_RESTART.md"))
        expect(page.locator("#panel-claims li.leaf[data-path='AFTER_RESTART.md']")).to_be_visible(timeout=3_000)
        snapshot(page, request, "reconnected")
    finally:
        api.close()
        first.stop()
        if second is not None:
            second.stop()


def test_agents_show_the_harness_they_run_in_and_the_files_they_are_editing(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog, request: pytest.FixtureRequest
) -> None:
    def hook(harness: str, payload: dict[str, Any]) -> dict[str, Any]:
        r = api.http.post(f"/v1/hooks/{harness}", json={"cwd": "/home/dev/proj", **payload})
        assert r.status_code == 200, r.text
        answer: dict[str, Any] = r.json()
        return answer

    def session(harness: str, harness_sid: str) -> str:
        answer = hook(harness, {"session_id": harness_sid, "hook_event_name": "SessionStart", "source": "startup"})
        found = re.search(r"this session is (s-[0-9a-f]+)", answer["hookSpecificOutput"]["additionalContext"])
        assert found
        return found.group(1)

    claude_sid, codex_sid = "eb58c0de-0000-4000-8000-00000000c1a0", "01a2b3c4-0000-7000-8000-00000000c0de"
    claude = session("claude", claude_sid)
    write = {"hook_event_name": "PreToolUse", "tool_name": "Write"}
    for path in ("src/app.py", "src/util.py", "README.md", "docs/guide.md"):
        file_input = {"file_path": f"/home/dev/proj/{path}", "content": "x"}
        assert hook("claude", {**write, "session_id": claude_sid, "tool_input": file_input}) == {}
    codex = session("codex", codex_sid)
    patch = "*** Begin Patch\n*** Add File: lib/new.rs\n+fn main() {}\n*** End Patch\n"
    codex_write = {"tool_name": "apply_patch", "tool_input": {"command": patch}, "hook_event_name": "PreToolUse"}
    assert hook("codex", {**codex_write, "session_id": codex_sid}) == {}
    plain = api.register("grace")

    sign_in(page, srv.base_url, api.reader_token())
    claude_row = page.locator(f"#panel-agents tr[data-session='{claude}']")
    expect(claude_row.locator(".badge-harness")).to_have_text("claude")
    expect(claude_row.locator(".badge-harness")).to_have_attribute("title", re.compile("Claude Code"))
    expect(claude_row.locator(".chip-file")).to_have_count(3)  # three shown, the rest counted
    expect(claude_row.locator(".chip-file[data-path='src/app.py']")).to_be_visible()
    expect(claude_row).to_contain_text("+1 files")
    codex_row = page.locator(f"#panel-agents tr[data-session='{codex}']")
    expect(codex_row.locator(".badge-harness")).to_have_text("codex")
    expect(codex_row.locator(".chip-file[data-path='lib/new.rs']")).to_be_visible()
    expect(page.locator(f"#panel-agents tr[data-session='{plain}'] .badge-harness")).to_have_count(0)

    # A file the harness writes next appears in its row without a reload.
    more = {"file_path": "/home/dev/proj/lib/more.rs"}
    assert hook("codex", {**write, "session_id": codex_sid, "tool_input": more}) == {}
    expect(codex_row.locator(".chip-file[data-path='lib/more.rs']")).to_be_visible(timeout=3_000)

    # In depth: the harness and every file it is editing.
    claude_row.click()
    drawer = page.locator("#agent-drawer")
    expect(drawer.locator("dd.harness")).to_have_text("claude")
    expect(drawer.locator("li.file-line")).to_have_count(4)
    expect(drawer.locator("li.file-line[data-path='docs/guide.md']")).to_contain_text(f"edit:{claude}")
    snapshot(page, request, "harnesses")
    assert page_log.errors == []
