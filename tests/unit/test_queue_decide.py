"""The work queue, decided without a database."""

from __future__ import annotations

from typing import Any

import pytest

from eventcoord.context import Caller, Context, Decision
from eventcoord.domain import queue as domain
from eventcoord.domain.queue import FileClaimView, ItemState
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError
from eventcoord.events import (
    WorkClaimed,
    WorkFinished,
    WorkRequeued,
    WorkStarted,
)

NOW = 1_800_000_000_000_000
TTL = 10
SECOND = 1_000_000


def ctx(now_us: int = NOW, role: str = "agent") -> Context:
    return Context(Caller("default", role), now_us, TTL)  # type: ignore[arg-type]


def session(sid: str = "s-a", *, kind: str = "agent", last_seen_us: int = NOW, ended_us: int | None = None) -> SessionState:
    return SessionState(sid, f"actor-{sid}", kind, True, "explicit-override", "host-1", last_seen_us, ended_us, None)


def item(
    status: str = "queued",
    session_id: str | None = None,
    *,
    item_id: str = "w-1",
    priority: int = 0,
    position: int = 1,
    issue: str | None = None,
    blocked_by: tuple[str, ...] = (),
    paths: tuple[str, ...] = (),
) -> ItemState:
    return ItemState(item_id, "P", issue, priority, status, session_id, None, blocked_by, paths, None, position)


def code_of(fn: Any, *args: Any) -> tuple[str, dict[str, Any]]:
    with pytest.raises(DomainError) as e:
        fn(*args)
    return e.value.code, e.value.details


# --- enqueue ---------------------------------------------------------------------------


def test_paths_are_normalised_deduplicated_and_refused_by_index() -> None:
    assert domain.normalise_paths(["./src//a.py", "src/a.py", "docs/"]) == ["src/a.py", "docs/"]
    for bad, index in ((["a", "/abs"], 1), (["../x"], 0), (["ok", "ok2", ""], 2)):
        code, details = code_of(domain.normalise_paths, bad)
        assert (code, details) == ("VALIDATION", {"field": f"paths[{index}]"})


def test_blockers_must_exist_and_are_deduplicated() -> None:
    assert domain.check_blockers(["w-1", "w-2", "w-1"], {"w-1", "w-2"}) == ["w-1", "w-2"]
    assert code_of(domain.check_blockers, ["w-1", "w-9"], {"w-1"}) == ("VALIDATION", {"field": "blocked_by[1]"})


def test_an_issue_stays_in_the_project_of_its_first_claim() -> None:
    domain.check_issue_project("I-1", "P", None)
    domain.check_issue_project("I-1", "P", "P")
    domain.check_issue_project(None, "P", "Q")
    assert code_of(domain.check_issue_project, "I-1", "P", "Q") == ("VALIDATION", {"field": "issue"})


# --- selection -------------------------------------------------------------------------


def test_selection_order_is_priority_then_age() -> None:
    items = [item(item_id="old-low", priority=1, position=1), item(item_id="new-high", priority=5, position=9), item(item_id="old-high", priority=5, position=3)]
    assert [i.item_id for i in sorted(items, key=lambda i: i.order)] == ["old-high", "new-high", "old-low"]


def test_only_done_blockers_release_an_item() -> None:
    blocked = item(blocked_by=("w-a", "w-b"))
    assert domain.blockers_done(item(), {})
    assert not domain.blockers_done(blocked, {"w-a": "done"})
    assert not domain.blockers_done(blocked, {"w-a": "done", "w-b": "failed"})
    assert domain.blockers_done(blocked, {"w-a": "done", "w-b": "done"})


def test_declared_paths_yield_to_present_exclusive_claims_of_others() -> None:
    it = item(paths=("src/core/a.py", "docs/"))
    assert domain.blocking_path(it, [FileClaimView("src/core/", "s-other", True)], "s-me") == "src/core/a.py"
    assert domain.blocking_path(it, [FileClaimView("docs/**/*.md", None, False)], "s-me") == "docs/"
    assert domain.blocking_path(it, [FileClaimView("src/", "s-other", False)], "s-me") is None  # holder gone
    assert domain.blocking_path(it, [FileClaimView("src/", "s-me", True)], "s-me") is None  # our own
    assert domain.blocking_path(it, [FileClaimView("tests/", "s-other", True)], "s-me") is None


def test_stale_items_are_those_of_non_human_workers_no_longer_live() -> None:
    stale_at = NOW - TTL * SECOND
    workers = {
        "s-gone": session("s-gone", last_seen_us=stale_at),
        "s-live": session("s-live"),
        "s-human": session("s-human", kind="human", last_seen_us=stale_at),
        "s-ended": session("s-ended", ended_us=NOW - 1),
        "s-me": session("s-me", last_seen_us=stale_at),
    }
    items = [
        item("claimed", "s-gone", item_id="a"),
        item("running", "s-gone", item_id="b"),
        item("running", "s-live", item_id="c"),
        item("running", "s-human", item_id="d"),
        item("claimed", "s-ended", item_id="e"),
        item("running", "s-me", item_id="f"),
        item("done", "s-gone", item_id="g"),
        item("claimed", "s-unknown", item_id="h"),
    ]
    assert [i.item_id for i in domain.stale_items(items, workers, ctx(), "s-me")] == ["a", "b", "e"]


def test_a_requeued_item_is_queued_without_a_worker() -> None:
    event, after = domain.requeued(item("running", "s-gone", issue="I-1"), "worker_stale")
    assert event == WorkRequeued(item_id="w-1", session_id="s-gone", reason="worker_stale")
    assert (after.status, after.session_id, after.fencing_token, after.issue) == ("queued", None, None, "I-1")


def test_a_claim_names_the_session_actor_host_and_token() -> None:
    assert domain.claimed(item(issue="I-1"), session("s-a"), 7) == WorkClaimed(
        item_id="w-1", project="P", issue="I-1", session_id="s-a", actor_key="actor-s-a", host="host-1", fencing_token=7
    )


# --- transitions -----------------------------------------------------------------------


def test_start_moves_a_claimed_item_of_the_caller_to_running() -> None:
    d = Decision()
    domain.decide_start(item("claimed", "s-a"), d, "s-a", False)
    assert d.events == [("work:w-1", WorkStarted(item_id="w-1", session_id="s-a"))]
    for status in ("queued", "running", "done", "cancelled"):
        code, details = code_of(domain.decide_start, item(status, "s-a"), Decision(), "s-a", False)
        assert (code, details) == ("INVALID_TRANSITION", {"item_id": "w-1", "status": status, "wanted": "running"})
    code, details = code_of(domain.decide_start, item("claimed", "s-a"), Decision(), "s-b", False)
    assert code == "NOT_HOLDER" and details["holder_session_id"] == "s-a"
    domain.decide_start(item("claimed", "s-a"), Decision(), "s-b", True)  # an admin may


@pytest.mark.parametrize(
    ("status", "outcome", "expected"),
    [
        ("running", "done", None),
        ("running", "failed", None),
        ("running", "oom_killed", None),
        ("running", "cancelled", None),
        ("claimed", "cancelled", None),
        ("claimed", "done", "INVALID_TRANSITION"),
        ("claimed", "failed", "INVALID_TRANSITION"),
        ("queued", "done", "INVALID_TRANSITION"),
        ("queued", "cancelled", "FORBIDDEN"),
        ("done", "done", "INVALID_TRANSITION"),
        ("failed", "cancelled", "INVALID_TRANSITION"),
        ("cancelled", "cancelled", "INVALID_TRANSITION"),
    ],
)
def test_finish_transitions_for_the_holder(status: str, outcome: Any, expected: str | None) -> None:
    it = item(status, "s-a" if status != "queued" else None)
    d = Decision()
    if expected is None:
        domain.decide_finish(it, d, "s-a", False, outcome)
        assert d.events == [("work:w-1", WorkFinished(item_id="w-1", session_id="s-a", outcome=outcome))]
    else:
        code, details = code_of(domain.decide_finish, it, d, "s-a", False, outcome)
        assert code == expected
        if expected == "INVALID_TRANSITION":
            assert details == {"item_id": "w-1", "status": status, "wanted": outcome}


def test_finish_by_another_session_or_an_admin() -> None:
    assert code_of(domain.decide_finish, item("running", "s-a"), Decision(), "s-b", False, "done")[0] == "NOT_HOLDER"
    assert code_of(domain.decide_finish, item("running", "s-a"), Decision(), None, False, "done")[0] == "NOT_HOLDER"
    d = Decision()
    domain.decide_finish(item("queued"), d, None, True, "cancelled")  # an admin cancels a queued item
    domain.decide_finish(item("running", "s-a"), Decision(), None, True, "failed")
    assert d.result == {"item_id": "w-1", "status": "cancelled"}
    assert domain.finish_release_reason("done") == "completed"
    assert {domain.finish_release_reason(o) for o in ("failed", "oom_killed", "cancelled")} == {"released"}
