"""The dashboard's Waits and Named leases views (docs/protocol.md#waiting) in a real headless chromium against a
real ``eventcoord serve``, on SQLite and on PostgreSQL: FIFO lines, the hand-off on release
seen live, capacity slots, a refused deadlock in the conflict feed, and the present-only note
while the history slider is in the past."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.browser.conftest import PageLog, SyncApi, sign_in, snapshot
from tests.helpers import ServerProcess

XSS_WAITER = "<img src=x onerror=window.__xss=3>"


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


def sessions(page: Any, selector: str) -> list[str | None]:
    """The data-session of each element matching ``selector``, in page order."""
    found: list[str | None] = page.eval_on_selector_all(selector, "els => els.map((e) => e.dataset.session)")
    return found


def test_three_waiters_in_fifo_order_and_the_hand_off_shown_live(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog, request: pytest.FixtureRequest
) -> None:
    holder = api.register("holder")
    api.ok({"type": "claim_issue", "session_id": holder, "project": "OPS", "issue": "OPS-1"})
    waiters = [api.register(actor) for actor in ("first", "second", XSS_WAITER)]
    for place, sid in enumerate(waiters, start=1):
        refusal = api.refused(
            {"type": "claim_issue", "session_id": sid, "project": "OPS", "issue": "OPS-1", "wait": True}, "ISSUE_HELD"
        )
        assert refusal["details"]["waiting"] == {"place": place, "waiters": place}
    sign_in(page, srv.base_url, api.reader_token())
    page.evaluate("window.__same_page = true")

    line = page.locator("#panel-waits li.wait-line[data-kind='issue'][data-key='OPS-1']")
    expect(line.locator("li.waiter")).to_have_count(3)
    assert sessions(page, "#panel-waits li.wait-line[data-key='OPS-1'] li.waiter") == waiters
    expect(line.locator("li.waiter .place")).to_have_text(["1", "2", "3"])
    expect(line.locator("li.waiter .actor")).to_have_text(["first", "second", XSS_WAITER])
    expect(line.locator(".waiting-count")).to_have_text("3 waiting")
    expect(line.locator(f".holder[data-session='{holder}']")).to_contain_text("holder")
    expect(line.locator(".holder .badge-handoff")).to_have_count(0)
    expect(line.locator("li.waiter").first.locator(".ago")).not_to_be_empty()  # how long waiting
    expect(page.locator("#panel-waits .count")).to_have_text("1 line · 3 waiting")
    # The other views point at the line: the lease has 3 waiting, each waiter says where it waits.
    expect(page.locator("#panel-leases tr[data-issue='OPS-1'] .badge-waiting")).to_have_text("3 waiting")
    expect(page.locator(f"#panel-agents tr[data-session='{waiters[1]}'] .chip-wait")).to_have_text("waits OPS-1 · 2")
    assert page.evaluate("window.__xss") is None
    assert page.locator("#panel-waits img").count() == 0
    snapshot(page, request, "waiting")

    # The holder releases: the first waiter is granted it in the same transaction, and the
    # view follows from the stream without a reload.
    api.ok({"type": "release_issue", "session_id": holder, "issue": "OPS-1"})
    expect(line.locator("li.waiter")).to_have_count(2)
    assert sessions(page, "#panel-waits li.wait-line[data-key='OPS-1'] li.waiter") == waiters[1:]
    expect(line.locator("li.waiter .place")).to_have_text(["1", "2"])
    new_holder = line.locator(f".holder[data-session='{waiters[0]}']")
    expect(new_holder).to_contain_text("first")
    expect(new_holder.locator(".badge-handoff")).to_have_text("handed off")
    expect(new_holder.locator(".token")).to_have_text("#2")
    expect(line.locator(".waiting-count")).to_have_text("2 waiting")
    expect(page.locator("#panel-waits li.handoff[data-key='OPS-1']")).to_contain_text("first")
    expect(page.locator("#panel-leases tr[data-issue='OPS-1']")).to_contain_text("first")
    expect(page.locator("#panel-leases tr[data-issue='OPS-1'] .badge-waiting")).to_have_text("2 waiting")
    expect(page.locator(f"#panel-agents tr[data-session='{waiters[0]}'] .chip-wait")).to_have_count(0)
    assert page.evaluate("window.__same_page") is True
    snapshot(page, request, "handed-off")

    # /v1/waits has no as_of: in the past the view says it shows the present.
    expect(page.locator("#panel-waits .present-only")).to_have_count(0)
    page.locator("#timeline-position").fill("2")
    page.locator("#timeline-position").press("Enter")
    expect(page.locator("body")).to_have_class("travelling")
    expect(page.locator("#panel-waits .present-only")).to_contain_text("the present")
    expect(line.locator("li.waiter")).to_have_count(2)
    page.locator("#timeline-live").click()
    expect(page.locator("#panel-waits .present-only")).to_have_count(0)
    assert page_log.errors == []


def test_a_capacity_two_lease_shows_both_slots_and_its_waiter(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog, request: pytest.FixtureRequest
) -> None:
    a, b, c = (api.register(actor) for actor in ("gpu-a", "gpu-b", "gpu-c"))
    acquire = {"type": "acquire_lease", "name": "gpu", "ttl_seconds": 300, "capacity": 2}
    tokens = [api.ok({**acquire, "session_id": s})["result"]["fencing_token"] for s in (a, b)]
    api.refused({**acquire, "session_id": c, "wait": True}, "LEASE_HELD")
    api.ok({"type": "acquire_lease", "session_id": a, "name": "dispatcher", "ttl_seconds": 300})
    # A files line beside it: the holder's directory claim covers the waited-for file.
    owner, editor = api.register("owner"), api.register("editor")
    api.ok({"type": "claim_files", "session_id": owner, "issue": "API-1", "paths": ["src/api/"]})
    files_wait = {"type": "claim_files", "session_id": editor, "issue": "API-2", "paths": ["src/api/models.py"]}
    api.refused({**files_wait, "wait": True}, "FILES_CLAIMED")
    sign_in(page, srv.base_url, api.reader_token())

    gpu = page.locator("#panel-named-leases li.named-lease[data-name='gpu']")
    expect(gpu.locator("li.slot")).to_have_count(2)
    expect(gpu.locator("li.slot.slot-held")).to_have_count(2)
    assert sessions(page, "#panel-named-leases li.named-lease[data-name='gpu'] li.slot") == [a, b]
    expect(gpu.locator("li.slot .token")).to_have_text([f"#{t}" for t in tokens])
    expect(gpu.locator("li.slot .actor")).to_have_text(["gpu-a", "gpu-b"])
    expect(gpu).to_contain_text("2 slots")
    expect(gpu).to_contain_text("2/2 held")
    expect(gpu.locator(".waiting-count")).to_have_text("1 waiting")
    expect(page.locator("#panel-named-leases li.named-lease[data-name='dispatcher'] li.slot")).to_have_count(1)
    line = page.locator("#panel-waits li.wait-line[data-kind='lease'][data-key='gpu']")
    expect(line.locator("li.waiter")).to_have_count(1)
    assert sessions(page, "#panel-waits li.wait-line[data-key='gpu'] .holder") == [a, b]
    path_line = page.locator("#panel-waits li.wait-line[data-kind='files'][data-key='src/api/models.py']")
    expect(path_line.locator("li.waiter")).to_contain_text(["editor"])
    expect(path_line.locator("li.waiter .issue")).to_have_text(["API-2"])
    expect(path_line.locator(f".holder[data-session='{owner}']")).to_contain_text("src/api/")
    snapshot(page, request, "slots")

    # A holder lets go: its slot is handed to the waiter, live.
    api.ok({"type": "release_lease", "session_id": a, "name": "gpu"})
    expect(gpu.locator(f"li.slot.slot-held[data-session='{c}']")).to_have_count(1)
    expect(gpu.locator("li.slot.slot-held")).to_have_count(2)
    expect(gpu.locator(".waiting-count")).to_have_count(0)
    expect(line).to_have_count(0)
    expect(page.locator("#panel-waits li.handoff[data-key='gpu']")).to_contain_text("gpu-c")
    assert page_log.errors == []


def test_a_refused_deadlock_appears_in_the_conflict_feed_live(
    srv: ServerProcess, api: SyncApi, page: Any, page_log: PageLog
) -> None:
    a, b = api.register("left"), api.register("right")
    api.ok({"type": "claim_issue", "session_id": a, "project": "OPS", "issue": "OPS-A"})
    api.ok({"type": "claim_issue", "session_id": b, "project": "OPS", "issue": "OPS-B"})
    sign_in(page, srv.base_url, api.reader_token())
    expect(page.locator("#panel-conflicts .empty")).to_be_visible()

    api.refused(
        {"type": "claim_issue", "session_id": a, "project": "OPS", "issue": "OPS-B", "wait": True}, "ISSUE_HELD"
    )
    refusal = api.refused(
        {"type": "claim_issue", "session_id": b, "project": "OPS", "issue": "OPS-A", "wait": True}, "DEADLOCK"
    )
    assert [step["session_id"] for step in refusal["details"]["cycle"]] == [b, a]
    deadlock = page.locator("#panel-conflicts li.deadlock")
    expect(deadlock).to_have_count(1)
    expect(deadlock).to_contain_text("OPS-A")
    expect(deadlock.locator(".cycle")).to_have_text("wait refused: right → OPS-A → left → OPS-B → right")
    expect(deadlock.locator(".badge-deadlock")).to_have_text("deadlock")
    # The wait that did go in is in the waits view.
    expect(page.locator("#panel-waits li.wait-line[data-key='OPS-B'] li.waiter")).to_have_count(1)
    assert sessions(page, "#panel-waits li.wait-line[data-key='OPS-B'] li.waiter") == [a]
    assert page_log.errors == []
