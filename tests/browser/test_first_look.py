"""The dashboard as a new user first looks at it, in a real headless chromium against a real
``eventcoord serve`` (both backends): root files are files in the heatmap, the hottest folder
is the reddest, messages show whole actor names and short session ids, the header pill does
not say "Live" over the past, and the login card says where a token comes from and keeps it
for the tab unless asked to remember it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.browser.conftest import PageLog, SyncApi, sign_in, snapshot
from tests.helpers import ServerProcess

SESSION_ID = re.compile(r"s-[0-9a-f]{16,}")


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


def claim(sid: str, issue: str, *paths: str, **kw: Any) -> dict[str, Any]:
    return {"type": "claim_files", "session_id": sid, "issue": issue, "paths": list(paths), **kw}


def rgb(style: str) -> tuple[int, int, int]:
    m = re.search(r"background:\s*rgb\((\d+),\s*(\d+),\s*(\d+)\)", style)
    assert m, style
    r, g, b = (int(x) for x in m.groups())
    return r, g, b


def redness(colour: tuple[int, int, int]) -> int:
    """How strongly red a colour is: red above the stronger of green and blue."""
    r, g, b = colour
    return r - max(g, b)


def test_a_root_file_is_a_file_tile_and_the_hottest_folder_is_the_reddest(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog, request: pytest.FixtureRequest
) -> None:
    holder, other = api.register("holder"), api.register("other")
    api.ok(claim(holder, "H-1", "README.md", "docs/", "src/", "tests/"))
    for path, times in (("README.md", 1), ("docs/a.md", 3), ("src/core/x.py", 8), ("tests/t.py", 5)):
        for _ in range(times):
            api.refused(claim(other, "O-1", path), "FILES_CLAIMED")
    sign_in(page, srv.base_url, api.reader_token())
    stage = page.locator("#panel-heatmap .treemap")
    readme = stage.locator(".tile[data-prefix='README.md']")
    expect(readme).to_have_attribute("data-count", "1")
    # A file: a plain tile named as the file, nothing to click into; folders end in "/".
    assert readme.evaluate("el => el.tagName") == "DIV" and "leaf" in (readme.get_attribute("class") or "")
    expect(readme.locator(".name")).to_have_text("README.md")
    expect(stage.locator(".tile[data-prefix='src'] .name")).to_have_text("src/")
    assert stage.locator(".tile[data-prefix='src']").evaluate("el => el.tagName") == "BUTTON"
    # The contention scale: the more collisions, the redder; the hottest folder is the reddest.
    tiles = [
        (int(t.get_attribute("data-count")), rgb(t.get_attribute("style") or "")) for t in stage.locator(".tile").all()
    ]
    assert sorted(n for n, _ in tiles) == [1, 3, 5, 8]
    ranked = [redness(colour) for _, colour in sorted(tiles)]
    assert ranked == sorted(ranked) and len(set(ranked)) == len(ranked), tiles
    snapshot(page, request, "heatmap")
    # In the claims tree the root file is a file too.
    expect(page.locator("#panel-claims li.leaf[data-path='README.md'] .path")).to_have_text("README.md")
    expect(page.locator("#panel-claims li.dir[data-prefix='README.md']")).to_have_count(0)
    assert page_log.errors == []


LONG_ACTORS = ("claude-code-refactoring-agent-number-one", "codex-parallel-worker-bob-the-builder")


def test_messages_show_whole_actor_names_and_short_session_ids_with_the_whole_id_on_hover(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog, request: pytest.FixtureRequest
) -> None:
    first, second = (api.register(actor) for actor in LONG_ACTORS)
    dana = api.register("dana", kind="human")
    api.ok(claim(first, "P-1", "src/core/"))
    api.ok(claim(dana, "P-3", "src/core/y.py", force=True))  # messages naming both sessions by id
    api.ok({"type": "post_message", "session_id": second, "channel": f"agent:{first}", "body": f"hi {first}, ok?"})
    sign_in(page, srv.base_url, api.reader_token())
    messages = page.locator("#panel-messages li.message")
    expect(messages).to_have_count(3)

    for item in messages.all():
        actor = item.locator(".actor")
        # The whole name, inside its message (not clipped at the panel's edge nor cut with "…").
        assert actor.inner_text() in (*LONG_ACTORS, "dana")
        box, inside = actor.bounding_box(), item.bounding_box()
        assert box and inside and box["x"] + box["width"] <= inside["x"] + inside["width"] + 0.5, (box, inside)
        assert actor.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
        # No whole session id in the text; each id is drawn short, the whole id on hover.
        text = item.inner_text()
        assert not SESSION_ID.search(text.replace("…", "")), text
    for sid in (first, dana):
        shown = page.locator(f"#panel-messages .msg-body .sid[title^='{sid}']").first
        expect(shown).to_have_text(f"{sid[:6]}…{sid[-6:]}")
    # A message to a session's channel names the session by its actor.
    to_first = page.locator("#panel-messages .channel .who", has_text=LONG_ACTORS[0]).first
    expect(to_first).to_have_attribute("title", f"{first} ({LONG_ACTORS[0]})")

    # Live: a message from and to sessions the page has never seen arrives named.
    late, later = api.register("late-arrival"), api.register("later-arrival")
    api.ok({"type": "post_message", "session_id": late, "channel": f"agent:{later}", "body": "welcome"})
    expect(messages).to_have_count(4)
    newest = messages.first
    expect(newest.locator(".actor")).to_have_text("late-arrival")
    expect(newest.locator(".channel .who")).to_have_text("later-arrival")
    snapshot(page, request, "messages")
    assert page_log.errors == []


def test_the_header_pill_says_history_while_the_board_shows_the_past(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog
) -> None:
    sid = api.register("erin")
    granted = api.ok({"type": "claim_issue", "session_id": sid, "project": "OPS", "issue": "OPS-1"})["position"]
    api.ok({"type": "release_issue", "session_id": sid, "issue": "OPS-1"})
    sign_in(page, srv.base_url, api.reader_token())
    pill = page.locator("#conn")
    expect(pill).to_have_text("Live")
    page.locator("#timeline-position").fill(str(granted))
    page.locator("#timeline-position").press("Enter")
    expect(page.locator("body")).to_have_class("travelling")
    expect(pill).to_have_text("History")
    assert "conn-live" not in (pill.get_attribute("class") or "")
    # Events still arrive meanwhile; the pill keeps saying the board shows the past.
    api.register("meanwhile")
    expect(page.locator("#timeline-when")).not_to_have_text("live")
    expect(pill).to_have_text("History")
    page.locator("#timeline-live").click()
    expect(pill).to_have_text("Live")
    expect(pill).to_have_class(re.compile(r"\bconn-live\b"))
    assert page_log.errors == []


def test_the_login_card_says_where_a_token_comes_from_and_remembers_it_only_when_asked(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog
) -> None:
    reader = api.reader_token()
    page.goto(srv.base_url + "/ui")
    card = page.locator("#login")
    expect(card).to_be_visible()
    help_text = " ".join(page.locator("#login-help").inner_text().split())
    assert "admin-token" in help_text and "eventcoord serve" in help_text
    assert "eventcoord token create --workspace default --role reader" in help_text
    remember = page.locator("#login-remember")
    expect(remember).not_to_be_checked()

    # Not asked to remember: this tab only (sessionStorage); another tab asks again.
    page.locator("#login-token").fill(reader)
    page.locator("#login-form button[type=submit]").click()
    page.wait_for_selector("body[data-ready='1']", timeout=15_000)
    stored = "() => [sessionStorage.getItem('eventcoord.token'), localStorage.getItem('eventcoord.token')]"
    assert page.evaluate(stored) == [reader, None]
    page.reload()  # the same tab keeps it
    page.wait_for_selector("body[data-ready='1']", timeout=15_000)
    expect(card).to_be_hidden()
    other = page.context.new_page()
    other.goto(srv.base_url + "/ui")
    expect(other.locator("#login")).to_be_visible()

    # Asked to remember: localStorage, so a new tab goes straight to the board.
    other.locator("#login-token").fill(reader)
    other.locator("#login-remember").check()
    other.locator("#login-form button[type=submit]").click()
    other.wait_for_selector("body[data-ready='1']", timeout=15_000)
    assert other.evaluate(stored) == [None, reader]
    third = page.context.new_page()
    third.goto(srv.base_url + "/ui")
    third.wait_for_selector("body[data-ready='1']", timeout=15_000)
    expect(third.locator("#login")).to_be_hidden()
    # Sign out forgets it everywhere it was kept.
    third.locator("#signout").click()
    expect(third.locator("#login")).to_be_visible()
    assert third.evaluate(stored) == [None, None]
    assert page_log.errors == []
