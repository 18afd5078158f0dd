"""Waiting (docs/protocol.md#waiting) decided without a database: lines served first, hand-off admission, lock delay."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from tests.unit.issue_givens import (
    ISSUE,
    LIMIT,
    NOW,
    PROJECT,
    SECOND,
    TTL,
    claim,
    ctx,
    free_view,
    lease_of,
    refused,
    registry,
    session,
    types,
    view_held_by,
)

from eventcoord.commands import ClaimIssue, ReleaseIssue
from eventcoord.context import Draft
from eventcoord.domain import waits
from eventcoord.domain.admission import DelayFrom, ProjectRules
from eventcoord.domain.deadlock import WaitGraph
from eventcoord.domain.handoff import IssueLine, hand_off_issue
from eventcoord.domain.issues import (
    ClaimState,
    ReleaseState,
    decide_claim_issue,
    decide_release_issue,
)
from eventcoord.domain.sessions import Claimant
from eventcoord.events import LeaseGranted, LeaseReleased, MessagePosted, WaitAbandoned

ME = session("s-me")
ALICE = session("s-alice")
BOB = session("s-bob")


def waiter(s, position: int) -> waits.Waiter:  # type: ignore[no-untyped-def]
    return waits.Waiter(position, "issue", ISSUE, s.session_id, s.actor_key, NOW, s, project=PROJECT, issue=ISSUE)


def line(
    *waiting,
    rules: ProjectRules | None = None,
    live: int = 0,
    held: dict[str, int] | None = None,
    delay: DelayFrom | None = None,
) -> IssueLine:  # type: ignore[no-untyped-def]
    return IssueLine(
        ISSUE,
        PROJECT,
        4,
        "where I stopped",
        rules or ProjectRules(),
        live,
        held or {},
        delay,
        list(waiting),
    )


def test_a_release_hands_the_issue_to_the_first_live_waiter_dropping_stale_ones() -> None:
    stale, bob = session("s-stale", live=False), session("s-bob")
    d = decide_release_issue(
        ReleaseState(ME, lease_of(ME, 4), line(waiter(stale, 1), waiter(bob, 2), waiter(ALICE, 3))),
        ReleaseIssue(session_id="s-me", issue=ISSUE),
        ctx(),
    )
    assert types(d) == ["LeaseReleased", "WaitAbandoned", "LeaseGranted", "MessagePosted"]
    dropped = [e for _, e in d.events if isinstance(e, WaitAbandoned)]
    assert [(e.session_id, e.reason) for e in dropped] == [("s-stale", "stale")]
    granted = next(e for _, e in d.events if isinstance(e, LeaseGranted))
    assert (granted.session_id, granted.fencing_token, granted.handed_off) == ("s-bob", 5, True)
    msg = next(e for _, e in d.events if isinstance(e, MessagePosted))
    assert msg.channel == "agent:s-bob" and "where I stopped" in msg.body
    assert d.result["handed_off_to"] == "s-bob"


def test_a_full_project_hands_nothing_out_and_the_per_agent_limit_passes_a_waiter_over() -> None:
    d = Draft()
    assert (
        hand_off_issue(
            d, line(waiter(ALICE, 1), rules=ProjectRules(wip_limit=2), live=2), Claimant("s-me", "me"), ctx()
        )
        is None
    )
    assert d.events == []
    bob = session("s-bob")
    d = Draft()
    got = hand_off_issue(
        d,
        line(waiter(ALICE, 1), waiter(bob, 2), rules=ProjectRules(agent_wip_limit=1), held={"s-alice": 1}),
        Claimant("s-me", "me"),
        ctx(),
    )
    assert got is not None and got.session_id == "s-bob"


def test_the_lock_delay_passes_over_waiters_until_it_has_passed() -> None:
    rules = ProjectRules(lock_delay_seconds=30)
    d = Draft()
    delay = DelayFrom(NOW - 10 * SECOND, "s-gone")
    assert hand_off_issue(d, line(waiter(ALICE, 1), rules=rules, delay=delay), Claimant("s-me", "me"), ctx()) is None
    later = DelayFrom(NOW - 31 * SECOND, "s-gone")
    assert (
        hand_off_issue(Draft(), line(waiter(ALICE, 1), rules=rules, delay=later), Claimant("s-me", "me"), ctx())
        is not None
    )


def test_a_reclaim_waits_at_most_the_delay_past_staleness() -> None:
    stale = session("s-old", live=False)  # last seen TTL + 1 s ago: stale since 1 s
    rules = ProjectRules(lock_delay_seconds=5)
    err = refused(
        decide_claim_issue, ClaimState(ME, view_held_by(stale, 3), LIMIT, 0, rules=rules), claim("s-me"), ctx()
    )
    assert err.code == "ISSUE_HELD" and err.details["reason"] == "lock_delay"
    d = decide_claim_issue(
        ClaimState(ME, view_held_by(stale, 3), LIMIT, 0, rules=rules), claim("s-me"), ctx(now=NOW + 5 * SECOND)
    )
    released = next(e for _, e in d.events if isinstance(e, LeaseReleased))
    assert released.reason == "expired" and released.ended_at_us == NOW - (TTL + 1) * SECOND + TTL * SECOND


def test_a_direct_claim_of_a_free_issue_serves_the_line_first() -> None:
    d = decide_claim_issue(
        ClaimState(ME, free_view(reg=registry(4)), LIMIT, 0, line=[waiter(ALICE, 1)]), claim("s-me"), ctx()
    )
    assert types(d) == ["LeaseGranted", "MessagePosted"]
    assert d.error is not None and d.error.code == "ISSUE_HELD" and d.error.details["session_id"] == "s-alice"
    mine = decide_claim_issue(
        ClaimState(ME, free_view(reg=registry(4)), LIMIT, 0, line=[waiter(ME, 1), waiter(ALICE, 2)]),
        claim("s-me"),
        ctx(),
    )
    assert types(mine) == ["LeaseGranted"] and mine.error is None and mine.result["fencing_token"] == 5


def test_a_claim_that_waits_asks_its_handler_to_join_and_the_join_is_decided_on_data() -> None:
    """The decision refuses and names the line; joining it (the caller's wait, the graph) is
    the handler's second step, decided by ``waits.join`` on what the handler loaded."""
    cmd = ClaimIssue(session_id="s-me", project=PROJECT, issue=ISSUE, wait=True)
    asks = decide_claim_issue(ClaimState(ME, view_held_by(ALICE, 3), LIMIT, 0, line=[waiter(BOB, 1)]), cmd, ctx())
    assert asks.join is not None and types(asks) == []
    assert asks.error is not None and asks.error.code == "ISSUE_HELD" and "waiting" not in asks.error.details
    assert (asks.join.started.kind, asks.join.started.key, asks.join.holders) == ("issue", ISSUE, ("s-alice",))
    assert [w.session_id for w in asks.join.line or ()] == ["s-bob"]
    joined = waits.join(asks, waits.JoinState(asks.join.line or (), None, WaitGraph(), asks.join.holders), ctx())
    assert types(joined) == ["WaitStarted"] and joined.join is None
    assert joined.error is not None and joined.error.details["waiting"] == {"place": 2, "waiters": 2}
    # A join that would close a cycle records it and refuses DEADLOCK instead.
    graph = WaitGraph()
    graph.add("s-alice", "issue", "OTHER", "s-me")
    refused_join = waits.join(asks, waits.JoinState((), None, graph, asks.join.holders), ctx())
    assert types(refused_join) == ["DeadlockRefused"] and refused_join.error is not None
    assert refused_join.error.code == "DEADLOCK"
    # Without ``wait`` the refusal is raised: nothing to join.
    assert refused(decide_claim_issue, ClaimState(ME, view_held_by(ALICE, 3), LIMIT, 0), claim("s-me"), ctx()).code == (
        "ISSUE_HELD"
    )


def test_a_decision_is_frozen_and_a_second_step_makes_a_new_one() -> None:
    d = decide_release_issue(
        ReleaseState(ME, lease_of(ME, 4), line(waiter(BOB, 1))), ReleaseIssue(session_id="s-me", issue=ISSUE), ctx()
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.error = None  # type: ignore[misc]
    later = d.then()
    later.add("issue:X", WaitAbandoned(kind="issue", key="X", session_id="s-x", reason="cancelled"))
    assert len(later.decided().events) == len(d.events) + 1 and d.result["handed_off_to"] == "s-bob"


def test_the_states_decisions_take_are_data_not_callbacks() -> None:
    from eventcoord.domain import files, named_leases

    for state in (
        ClaimState,
        ReleaseState,
        files.ClaimFilesState,
        files.ReleaseFilesState,
        IssueLine,
        named_leases.NamedLeaseCommandState,
        waits.JoinState,
        waits.CancelState,
    ):
        hints = typing.get_type_hints(state)
        assert not [name for name, hint in hints.items() if "Callable" in str(hint)], state.__name__
