"""The work queue, decided without a database: enqueue, transitions, recovery.

Decisions read through :class:`tests.unit.givens.MemoryReads`, an in-memory implementation
of :class:`eventcoord.domain.queue.WorkReads` (what the handler reads from the database).
claim_next_work's selection has its own module, test_queue_pull.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.givens import NOW, SECOND, TTL, MemoryReads, code_of, ctx, gone, item, session

from eventcoord.commands import EnqueueWork, FinishWork, StartWork
from eventcoord.context import Decision
from eventcoord.domain import queue as domain
from eventcoord.domain.files import normalise_paths
from eventcoord.domain.issues import LeaseState
from eventcoord.domain.queue import FileClaimView, ItemState, StaleWork
from eventcoord.events import (
    LeaseReleased,
    WorkClaimed,
    WorkEnqueued,
    WorkFinished,
    WorkRequeued,
    WorkStarted,
)


def start(it: ItemState, session_id: str, admin: bool, reads: MemoryReads | None = None) -> Decision:
    state = domain.TransitionState(it, session(session_id), reads or MemoryReads())
    return domain.decide_start_work(
        state, StartWork(session_id=session_id, item_id=it.item_id), ctx(role="admin" if admin else "agent")
    )


def finish(
    it: ItemState, session_id: str | None, admin: bool, outcome: Any, reads: MemoryReads | None = None
) -> Decision:
    state = domain.TransitionState(it, session(session_id) if session_id else None, reads or MemoryReads())
    cmd = FinishWork(session_id=session_id, item_id=it.item_id, outcome=outcome)
    return domain.decide_finish_work(state, cmd, ctx(role="admin" if admin else "agent"))


# --- enqueue ---------------------------------------------------------------------------


def test_paths_are_normalised_deduplicated_and_refused_by_index() -> None:
    assert normalise_paths(["./src//a.py", "src/a.py", "docs/"]) == ["src/a.py", "docs/"]
    for bad, index, reason in (
        (["a", "/abs"], 1, "absolute"),
        (["../x"], 0, "dotdot"),
        (["ok", "ok2", ""], 2, "empty"),
    ):
        code, details = code_of(normalise_paths, bad)
        assert (code, details) == ("VALIDATION", {"field": f"paths[{index}]", "reason": reason})


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
    items = [
        item(item_id="old-low", priority=1, position=1),
        item(item_id="new-high", priority=5, position=9),
        item(item_id="old-high", priority=5, position=3),
    ]
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
    d = start(item("claimed", "s-a"), "s-a", False)
    assert d.events == [("work:w-1", WorkStarted(item_id="w-1", session_id="s-a"))]
    for status in ("queued", "running", "done", "cancelled"):
        code, details = code_of(start, item(status, "s-a"), "s-a", False)
        assert (code, details) == ("INVALID_TRANSITION", {"item_id": "w-1", "status": status, "wanted": "running"})
    code, details = code_of(start, item("claimed", "s-a"), "s-b", False)
    assert code == "NOT_HOLDER" and details["holder_session_id"] == "s-a"
    start(item("claimed", "s-a"), "s-b", True)  # an admin may


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
    if expected is None:
        d = finish(it, "s-a", False, outcome)
        assert d.events == [("work:w-1", WorkFinished(item_id="w-1", session_id="s-a", outcome=outcome))]
    else:
        code, details = code_of(finish, it, "s-a", False, outcome)
        assert code == expected
        if expected == "INVALID_TRANSITION":
            assert details == {"item_id": "w-1", "status": status, "wanted": outcome}


def test_finish_by_another_session_or_an_admin() -> None:
    assert code_of(finish, item("running", "s-a"), "s-b", False, "done")[0] == "NOT_HOLDER"
    # without a session only an admin may finish (the rule the handler used to check first)
    assert code_of(finish, item("running", "s-a"), None, False, "done") == ("FORBIDDEN", {"item_id": "w-1"})
    d = finish(item("queued"), None, True, "cancelled")  # an admin cancels a queued item
    finish(item("running", "s-a"), None, True, "failed")
    assert d.result == {"item_id": "w-1", "status": "cancelled"}
    assert domain.finish_release_reason("done") == "completed"
    assert {domain.finish_release_reason(o) for o in ("failed", "oom_killed", "cancelled")} == {"released"}


def test_start_or_finish_of_an_unknown_item_or_by_an_ended_session_is_refused_first() -> None:
    unknown = domain.TransitionState(None, None)
    assert code_of(domain.decide_start_work, unknown, StartWork(session_id="s-a", item_id="w-9"), ctx()) == (
        "NOT_FOUND",
        {"item_id": "w-9"},
    )
    assert (
        code_of(domain.decide_finish_work, unknown, FinishWork(session_id="s-a", item_id="w-9", outcome="done"), ctx())[
            0
        ]
        == "NOT_FOUND"
    )
    reads = MemoryReads()
    ended = domain.TransitionState(item("claimed", "s-a"), session("s-a", ended_us=NOW - 1), reads)
    assert (
        code_of(domain.decide_start_work, ended, StartWork(session_id="s-a", item_id="w-1"), ctx())[0]
        == "SESSION_NOT_LIVE"
    )
    assert reads.asked == []  # refused before any stale work is recovered


# --- stale-worker recovery (decided, not loaded) ----------------------------------------


def test_recovery_requeues_and_releases_each_lease_its_worker_still_holds_once() -> None:
    a = item("running", "s-gone", item_id="a", issue="I-1", position=1)
    b = item("claimed", "s-gone", item_id="b", issue="I-1", position=2)
    c = item("claimed", "s-old", item_id="c", issue="I-2", position=3)
    leases = {
        "I-1": LeaseState("I-1", "P", "s-gone", "actor-s-gone", 4),
        "I-2": LeaseState("I-2", "P", "s-new", "actor-s-new", 8),
    }
    r = domain.recover(StaleWork([a, b, c], leases), "s-me")
    assert r.events == [
        ("work:a", WorkRequeued(item_id="a", session_id="s-gone", reason="worker_stale")),
        (
            "issue:I-1",
            LeaseReleased(
                issue="I-1", session_id="s-gone", reason="expired", fencing_token=4, by_session_id="s-me", project="P"
            ),
        ),
        ("work:b", WorkRequeued(item_id="b", session_id="s-gone", reason="worker_stale")),
        ("work:c", WorkRequeued(item_id="c", session_id="s-old", reason="worker_stale")),
    ]
    assert r.released == {"I-1": 1}
    assert {i: (x.status, x.session_id) for i, x in r.items.items()} == {
        "a": ("queued", None),
        "b": ("queued", None),
        "c": ("queued", None),
    }
    assert [e for _, e in r.reclaiming("I-1")] == [e for k, (_, e) in enumerate(r.events) if k != 1]
    assert r.reclaiming("I-2") == r.events and r.reclaiming(None) == r.events


def test_stale_items_are_listed_in_selection_order() -> None:
    workers = {"s-gone": gone("s-gone")}
    items = [
        item("claimed", "s-gone", item_id="low", priority=0, position=1),
        item("claimed", "s-gone", item_id="high", priority=9, position=5),
    ]
    assert [i.item_id for i in domain.stale_items(items, workers, ctx(), None)] == ["high", "low"]


def test_enqueue_records_the_item_after_recovering_stale_work() -> None:
    stale = StaleWork([item("running", "s-gone", item_id="old")], {})
    cmd = EnqueueWork(
        project="P", issue="I-1", priority=2, payload={"k": 1}, blocked_by=["w-b", "w-b"], paths=["./src//x.py"]
    )
    ids = iter(["w-new"])
    c = ctx()
    c.make_id = lambda prefix: next(ids)
    d = domain.decide_enqueue_work(domain.EnqueueState(["w-b"], None, MemoryReads(stale=stale)), cmd, c)
    assert d.events == [
        ("work:old", WorkRequeued(item_id="old", session_id="s-gone", reason="worker_stale")),
        (
            "work:w-new",
            WorkEnqueued(
                item_id="w-new",
                project="P",
                issue="I-1",
                priority=2,
                payload={"k": 1},
                blocked_by=["w-b"],
                paths=["src/x.py"],
            ),
        ),
    ]
    assert d.result == {"item_id": "w-new"}
    bad = EnqueueWork(project="P", issue="I-1")
    assert code_of(domain.decide_enqueue_work, domain.EnqueueState([], "Q", MemoryReads()), bad, ctx())[1] == {
        "field": "issue"
    }


# --- finish_work releases the item's lease ------------------------------------------------


def test_finishing_releases_the_workers_lease_unless_another_item_needs_it() -> None:
    running = item("running", "s-a", issue="I-1")
    lease = LeaseState("I-1", "P", "s-a", "actor-s-a", 4)
    d = finish(running, "s-a", False, "done", MemoryReads(leases={"I-1": lease}))
    assert d.events[-1] == (
        "issue:I-1",
        LeaseReleased(issue="I-1", session_id="s-a", reason="completed", fencing_token=4, project="P"),
    )
    by_admin = finish(running, None, True, "failed", MemoryReads(leases={"I-1": lease}))
    assert by_admin.events[-1] == (
        "issue:I-1",
        LeaseReleased(
            issue="I-1", session_id="s-a", reason="released", fencing_token=4, by_session_id=None, project="P"
        ),
    )
    kept = finish(running, "s-a", False, "done", MemoryReads(leases={"I-1": lease}, others=1))
    assert [type(e) for _, e in kept.events] == [WorkFinished]
    someone_elses = finish(
        running, "s-a", False, "done", MemoryReads(leases={"I-1": LeaseState("I-1", "P", "s-b", "x", 9)})
    )
    assert [type(e) for _, e in someone_elses.events] == [WorkFinished]


def test_finishing_an_item_the_recovery_requeued_is_a_transition_from_queued() -> None:
    stale = StaleWork([item("running", "s-gone", issue=None)], {})
    reads = MemoryReads(stale=stale)
    code, details = code_of(finish, item("running", "s-gone"), "s-a", False, "done", reads)
    assert (code, details["status"]) == ("INVALID_TRANSITION", "queued")
