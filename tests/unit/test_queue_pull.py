"""claim_next_work decided without a database: which item a pull takes, and its lease.

The reads are :class:`tests.unit.givens.MemoryReads`; what a pull asked for is recorded,
so the tests also show it reads no more than it needs.
"""

from __future__ import annotations

import msgspec
import pytest
from tests.unit.givens import NOW, SECOND, MemoryReads, ctx, gone, item, session

from eventcoord.commands import ClaimNextWork
from eventcoord.context import Decision
from eventcoord.domain import queue as domain
from eventcoord.domain.issues import IssueState, IssueView, LeaseState
from eventcoord.domain.queue import FileClaimView, ItemState, StaleWork
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError
from eventcoord.events import (
    LeaseGranted,
    LeaseReleased,
    WorkClaimed,
    WorkRequeued,
)

# --- claim_next_work: selection (decided, reads supplied) --------------------------------


def pull(reads: MemoryReads, *, me: SessionState | None = None, wip_limit: int = 3) -> Decision:
    me = me or session("s-me")
    state = domain.ClaimNextState(me, wip_limit, reads)
    return domain.decide_claim_next_work(state, ClaimNextWork(session_id=me.session_id, project="P"), ctx())


def picked(d: Decision) -> str | None:
    got = d.result["item"]
    return None if got is None else str(got["item_id"])


def test_pull_takes_the_highest_priority_then_oldest_eligible_item() -> None:
    reads = MemoryReads(queue=[item(item_id="old", position=1), item(item_id="urgent", priority=5, position=7)])
    d = pull(reads)
    assert picked(d) == "urgent"
    assert d.events == [
        (
            "work:urgent",
            WorkClaimed(
                item_id="urgent",
                project="P",
                issue=None,
                session_id="s-me",
                actor_key="actor-s-me",
                host="host-1",
                fencing_token=None,
            ),
        )
    ]
    assert d.result["item"]["fencing_token"] is None and d.result["item"]["status"] == "claimed"


def test_pull_skips_blocked_items_and_items_whose_paths_are_claimed() -> None:
    reads = MemoryReads(
        queue=[
            item(item_id="blocked", position=1, blocked_by=("w-x",)),
            item(item_id="pathed", position=2, paths=("src/a.py",)),
            item(item_id="free", position=3),
        ],
        status={"w-x": "failed"},
        claims=[FileClaimView("src/", "s-other", True)],
    )
    assert picked(pull(reads)) == "free"
    assert reads.asked == ["stale_work:s-me", "queued:s-me:", "statuses:w-x", "claims"]


def test_pull_answers_no_item_when_nothing_is_eligible_keeping_the_recovery() -> None:
    stale = StaleWork([item("running", "s-gone", item_id="r", blocked_by=("w-x",))], {})
    d = pull(MemoryReads(stale=stale, status={"w-x": "queued"}))
    assert d.result == {"item": None}
    assert d.events == [("work:r", WorkRequeued(item_id="r", session_id="s-gone", reason="worker_stale"))]


def test_pull_grants_the_issue_lease_with_the_next_token_and_the_payload() -> None:
    queued = ItemState("w-1", "P", "I-1", 0, "queued", None, None, (), (), msgspec.json.encode({"a": [1]}).decode(), 1)
    reads = MemoryReads(
        queue=[queued], issues={"I-1": IssueView("I-1", IssueState("I-1", "P", 6, None, None), None, None, ())}
    )
    d = pull(reads)
    assert [type(e) for _, e in d.events] == [LeaseGranted, WorkClaimed]
    assert d.events[0] == (
        "issue:I-1",
        LeaseGranted(project="P", issue="I-1", session_id="s-me", actor_key="actor-s-me", fencing_token=7),
    )
    assert d.result["item"]["fencing_token"] == 7 and d.result["item"]["payload"] == {"a": [1]}


def test_pull_skips_issues_held_by_others_in_other_projects_or_over_the_cap() -> None:
    alice = session("s-alice")
    held = IssueView(
        "I-held",
        IssueState("I-held", "P", 1, None, None),
        LeaseState("I-held", "P", "s-alice", "actor-s-alice", 1),
        alice,
        (),
    )
    elsewhere = IssueView("I-q", IssueState("I-q", "Q", 1, None, None), None, None, ())
    reads = MemoryReads(
        queue=[
            item(item_id="a", position=1, issue="I-held"),
            item(item_id="b", position=2, issue="I-q"),
            item(item_id="c", position=3, issue="I-cap"),
        ],
        issues={"I-held": held, "I-q": elsewhere},
        live={"I-cap": 3},
    )
    assert pull(reads).result == {"item": None}
    # the cap is counted only for an issue that could be taken; met, it narrows the queue
    assert reads.asked == [
        "stale_work:s-me",
        "queued:s-me:",
        "issue:I-held",
        "issue:I-q",
        "issue:I-cap",
        "live:I-cap",
        "held:s-me",
        "narrow:",
    ]


def test_pull_keeps_a_lease_the_caller_already_holds() -> None:
    me = session("s-me")
    mine = IssueView(
        "I-1", IssueState("I-1", "P", 3, None, None), LeaseState("I-1", "P", "s-me", "actor-s-me", 3), me, ()
    )
    d = pull(MemoryReads(queue=[item(issue="I-1")], issues={"I-1": mine}, live={"I-1": 99}), me=me)
    assert [type(e) for _, e in d.events] == [WorkClaimed] and d.result["item"]["fencing_token"] == 3


def test_pull_reclaims_a_lease_the_recovery_released_in_one_step() -> None:
    # the stale worker's item goes back to the queue and is pulled again by the caller
    worker = gone("s-gone")
    lease = LeaseState("I-1", "P", "s-gone", "actor-s-gone", 5)
    stale = StaleWork([item("running", "s-gone", item_id="w-1", issue="I-1")], {"I-1": lease})
    view = IssueView("I-1", IssueState("I-1", "P", 5, None, None), lease, worker, ())
    d = pull(MemoryReads(stale=stale, issues={"I-1": view}))
    expired = LeaseReleased(
        issue="I-1", session_id="s-gone", reason="expired", fencing_token=5, by_session_id="s-me", project="P"
    )
    assert d.events == [
        ("work:w-1", WorkRequeued(item_id="w-1", session_id="s-gone", reason="worker_stale")),
        ("issue:I-1", expired),
        (
            "issue:I-1",
            LeaseGranted(project="P", issue="I-1", session_id="s-me", actor_key="actor-s-me", fencing_token=6),
        ),
        (
            "work:w-1",
            WorkClaimed(
                item_id="w-1",
                project="P",
                issue="I-1",
                session_id="s-me",
                actor_key="actor-s-me",
                host="host-1",
                fencing_token=6,
            ),
        ),
    ]


def test_pull_never_hands_out_a_stale_holders_issue_it_did_not_recover() -> None:
    # A stale holder's issue (leased by claim_issue, not by a work item)
    # queued at priority 9 is skipped, not reclaimed; the free one at priority 1 is taken.
    lease = LeaseState("I-stale", "P", "s-gone", "actor-s-gone", 4)
    stale_view = IssueView("I-stale", IssueState("I-stale", "P", 4, None, None), lease, gone("s-gone"), ())
    reads = MemoryReads(
        queue=[
            item(item_id="w-stale", priority=9, position=1, issue="I-stale"),
            item(item_id="w-free", priority=1, position=2, issue="I-free"),
        ],
        issues={"I-stale": stale_view},
    )
    d = pull(reads)
    assert picked(d) == "w-free"
    assert [type(e) for _, e in d.events] == [LeaseGranted, WorkClaimed]
    assert not [e for _, e in d.events if isinstance(e, LeaseReleased)]


def test_pull_skips_a_human_held_issue_live_or_not() -> None:
    human = session("s-person", kind="human", last_seen_us=NOW - 100 * SECOND)
    lease = LeaseState("I-h", "P", "s-person", "actor-s-person", 2)
    view = IssueView("I-h", IssueState("I-h", "P", 2, None, None), lease, human, ())
    assert picked(pull(MemoryReads(queue=[item(issue="I-h", priority=9)], issues={"I-h": view}))) is None


def test_pull_that_cannot_reclaim_leaves_the_released_lease_where_the_recovery_put_it() -> None:
    lease = LeaseState("I-1", "P", "s-gone", "actor-s-gone", 5)
    stale = StaleWork(
        [item("running", "s-gone", item_id="w-1", issue="I-1"), item("running", "s-gone", item_id="w-2", position=2)],
        {"I-1": lease},
    )
    view = IssueView("I-1", IssueState("I-1", "P", 5, None, None), lease, gone("s-gone"), ())
    d = pull(MemoryReads(stale=stale, issues={"I-1": view}, live={"I-1": 3}))
    assert [(s, type(e).__name__) for s, e in d.events] == [
        ("work:w-1", "WorkRequeued"),
        ("issue:I-1", "LeaseReleased"),
        ("work:w-2", "WorkRequeued"),
        ("work:w-2", "WorkClaimed"),
    ]


def test_only_a_live_session_pulls_and_a_refused_pull_recovers_nothing() -> None:
    reads = MemoryReads(queue=[item()])
    for me in (session("s-me", ended_us=NOW - 1), gone("s-me")):
        with pytest.raises(DomainError) as e:
            pull(reads, me=me)
        assert e.value.code == "SESSION_NOT_LIVE"
    assert reads.asked == []


# --- claim_next_work at the project's cap: the queue is not read item by item -----------


def test_a_pull_at_the_cap_reads_no_issue_after_a_free_one_met_the_cap() -> None:
    # Every free issue meets the cap the first one met (the count leaves out only a lease on
    # the issue itself): the fifty behind it are skipped unread, and the item without an
    # issue at the end of the queue (it takes no lease) is still taken.
    queue = [item(item_id=f"w-{i}", position=i, issue=f"I-{i}") for i in range(50)]
    reads = MemoryReads(queue=[*queue, item(item_id="plain", position=99)], live={"I-0": 3})
    assert picked(pull(reads)) == "plain"
    assert reads.asked == ["stale_work:s-me", "queued:s-me:", "issue:I-0", "live:I-0", "held:s-me", "narrow:"]


def test_a_pull_at_the_cap_still_takes_an_item_of_an_issue_the_caller_holds() -> None:
    me = session("s-me")
    lease = LeaseState("I-mine", "P", "s-me", "actor-s-me", 4)
    mine = IssueView("I-mine", IssueState("I-mine", "P", 4, None, None), lease, me, ())
    reads = MemoryReads(
        queue=[
            item(item_id="w-0", position=0, issue="I-0"),
            item(item_id="w-1", position=1, issue="I-1"),
            item(item_id="w-mine", position=2, issue="I-mine"),
        ],
        issues={"I-mine": mine},
        leases={"I-mine": lease},
        live={"I-0": 3},
    )
    d = pull(reads, me=me)
    assert picked(d) == "w-mine" and [type(e) for _, e in d.events] == [WorkClaimed]
    assert reads.asked == [
        "stale_work:s-me",
        "queued:s-me:",
        "issue:I-0",
        "live:I-0",
        "held:s-me",
        "narrow:I-mine",
        "issue:I-mine",
    ]


def test_a_pull_at_the_cap_still_reclaims_a_lease_its_recovery_released() -> None:
    # The recovered lease is left out of the count: one fewer than the cap, so it is taken.
    lease = LeaseState("I-1", "P", "s-gone", "actor-s-gone", 5)
    stale = StaleWork([item("running", "s-gone", item_id="w-1", position=2, issue="I-1")], {"I-1": lease})
    view = IssueView("I-1", IssueState("I-1", "P", 5, None, None), lease, gone("s-gone"), ())
    reads = MemoryReads(
        stale=stale,
        queue=[item(item_id="w-0", position=1, issue="I-0")],
        issues={"I-1": view},
        live={"I-0": 3, "I-1": 2},
    )
    d = pull(reads)
    assert picked(d) == "w-1"
    # narrowed to the caller's leases (none) and the issue its recovery freed
    assert reads.asked == [
        "stale_work:s-me",
        "queued:s-me:I-1",
        "issue:I-0",
        "live:I-0",
        "held:s-me",
        "narrow:I-1",
        "issue:I-1",
        "live:I-1",
    ]


def test_a_pull_under_the_cap_reads_each_issue_it_passes() -> None:
    # Held issues do not put the pull at the cap: the free one behind them is taken.
    alice = session("s-alice")
    held = {
        f"I-{i}": IssueView(
            f"I-{i}", IssueState(f"I-{i}", "P", 1, None, None), LeaseState(f"I-{i}", "P", "s-alice", "a", 1), alice, ()
        )
        for i in range(3)
    }
    queue = [item(item_id=f"w-{i}", position=i, issue=f"I-{i}") for i in range(4)]
    reads = MemoryReads(queue=queue, issues=held, live={"I-3": 2})
    assert picked(pull(reads)) == "w-3"
    assert reads.asked == [
        "stale_work:s-me",
        "queued:s-me:",
        "issue:I-0",
        "issue:I-1",
        "issue:I-2",
        "issue:I-3",
        "live:I-3",
    ]


def test_a_pull_asks_for_the_queue_without_the_issues_others_hold_but_those_it_recovered() -> None:
    # The store's pages leave out the items on issues other sessions hold, live or stale
    # (no pull takes them), except those whose lease this pull's recovery released: the pull
    # says who it is and which it recovered. (The store's side: tests/e2e/test_queue.py,
    # tests/contract/test_queue_pull_reads.py.)
    me = session("s-me")
    leases = {f"I-{i}": LeaseState(f"I-{i}", "P", "s-alice", "a", 1) for i in range(3)}
    leases["I-stale"] = LeaseState("I-stale", "P", "s-gone", "actor-s-gone", 2)
    leases["I-mine"] = LeaseState("I-mine", "P", "s-me", "actor-s-me", 4)
    queue = [item(item_id=f"w-{i}", position=i, issue=f"I-{i}") for i in range(3)]
    queue += [item(item_id="w-queued", position=3, issue="I-stale"), item(item_id="w-mine", position=4, issue="I-mine")]
    mine = IssueView("I-mine", IssueState("I-mine", "P", 4, None, None), leases["I-mine"], me, ())
    reads = MemoryReads(queue=queue, issues={"I-mine": mine}, leases=leases)
    d = pull(reads, me=me)
    assert picked(d) == "w-mine" and [type(e) for _, e in d.events] == [WorkClaimed]
    assert reads.asked == ["stale_work:s-me", "queued:s-me:", "issue:I-mine"]

    # the stale holder's running item is recovered by this pull: the item queued on its
    # issue (ahead of the recovered one) is taken on the lease the recovery released
    lease = leases["I-stale"]
    stale = StaleWork([item("running", "s-gone", item_id="w-stale", position=9, issue="I-stale")], {"I-stale": lease})
    view = IssueView("I-stale", IssueState("I-stale", "P", 2, None, None), lease, gone("s-gone"), ())
    reads = MemoryReads(stale=stale, queue=queue[:4], issues={"I-stale": view}, leases=leases)
    d = pull(reads, me=me)
    assert picked(d) == "w-queued"
    assert reads.asked == ["stale_work:s-me", "queued:s-me:I-stale", "issue:I-stale", "live:I-stale"]
