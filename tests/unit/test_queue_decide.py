"""The work queue and named leases, decided without a database."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventcoord.codec import format_time
from eventcoord.context import Caller, Context, Decision
from eventcoord.domain import queue as domain
from eventcoord.domain.queue import FileClaimView, ItemState, NamedLeaseState
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError
from eventcoord.events import (
    NamedLeaseAcquired,
    NamedLeaseReleased,
    NamedLeaseRenewed,
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


# --- named leases ----------------------------------------------------------------------


def lease(holder: str | None, token: int, expires_us: int | None, ttl: int = 30) -> NamedLeaseState:
    return NamedLeaseState("dispatcher", holder, f"actor-{holder}" if holder else None, token, ttl, expires_us)


def test_a_free_name_is_granted_with_the_default_ttl() -> None:
    d = domain.decide_acquire("dispatcher", None, session("s-a"), None, ctx())
    expires = NOW + domain.DEFAULT_LEASE_TTL_SECONDS * SECOND
    assert d.events == [
        (
            "lease:dispatcher",
            NamedLeaseAcquired(name="dispatcher", session_id="s-a", actor_key="actor-s-a", fencing_token=1, ttl_seconds=30, expires_at_us=expires),
        )
    ]
    assert d.result["fencing_token"] == 1 and d.result["expires_at"].endswith("Z") and d.session_id == "s-a"
    released = domain.decide_acquire("dispatcher", lease(None, 4, None), session("s-a"), 5, ctx())
    assert [type(e) for _, e in released.events] == [NamedLeaseAcquired] and released.result["fencing_token"] == 5


def test_a_live_lease_of_another_is_held() -> None:
    code, details = code_of(domain.decide_acquire, "dispatcher", lease("s-b", 3, NOW + 1), session("s-a"), None, ctx())
    assert code == "LEASE_HELD"
    assert details == {"name": "dispatcher", "session_id": "s-b", "actor_key": "actor-s-b", "expires_at": format_time(NOW + 1)}


def test_an_expired_lease_is_taken_over_with_a_higher_token() -> None:
    d = domain.decide_acquire("dispatcher", lease("s-b", 3, NOW), session("s-a"), 2, ctx())
    assert [e for _, e in d.events] == [
        NamedLeaseReleased(name="dispatcher", session_id="s-b", reason="expired"),
        NamedLeaseAcquired(name="dispatcher", session_id="s-a", actor_key="actor-s-a", fencing_token=4, ttl_seconds=2, expires_at_us=NOW + 2 * SECOND),
    ]


def test_reacquire_by_the_holder_renews_with_the_same_token() -> None:
    for expires in (NOW + SECOND, NOW - SECOND):
        d = domain.decide_acquire("dispatcher", lease("s-a", 3, expires, ttl=7), session("s-a"), None, ctx())
        assert [e for _, e in d.events] == [
            NamedLeaseRenewed(name="dispatcher", session_id="s-a", fencing_token=3, ttl_seconds=7, expires_at_us=NOW + 7 * SECOND)
        ]
        assert d.result["renewed"] is True and d.result["fencing_token"] == 3


def test_only_the_holder_renews_or_releases() -> None:
    for fn in (domain.decide_renew,):
        assert code_of(fn, "dispatcher", lease("s-b", 1, NOW + 1), session("s-a"), None, ctx())[0] == "NOT_HOLDER"
        assert code_of(fn, "dispatcher", None, session("s-a"), None, ctx())[0] == "NOT_HOLDER"
    assert code_of(domain.decide_release, "dispatcher", lease("s-b", 1, NOW + 1), session("s-a"), ctx())[0] == "NOT_HOLDER"
    assert code_of(domain.decide_release, "dispatcher", lease(None, 1, None), session("s-a"), ctx())[0] == "NOT_HOLDER"
    d = domain.decide_release("dispatcher", lease("s-a", 2, NOW + 1), session("s-a"), ctx())
    assert [e for _, e in d.events] == [NamedLeaseReleased(name="dispatcher", session_id="s-a", reason="released")]
    assert d.result["fencing_token"] == 2


def _evolve(state: NamedLeaseState | None, d: Decision) -> NamedLeaseState | None:
    """What the named_leases projection does with a decision's events."""
    for _, e in d.events:
        if isinstance(e, NamedLeaseAcquired):
            state = NamedLeaseState(e.name, e.session_id, e.actor_key, e.fencing_token, e.ttl_seconds, e.expires_at_us)
        elif isinstance(e, NamedLeaseRenewed) and state is not None:
            state = NamedLeaseState(state.name, state.session_id, state.actor_key, state.fencing_token, e.ttl_seconds, e.expires_at_us)
        elif isinstance(e, NamedLeaseReleased) and state is not None and state.session_id == e.session_id:
            state = NamedLeaseState(state.name, None, None, state.fencing_token, state.ttl_seconds, None)
    return state


@given(
    st.lists(
        st.tuples(st.sampled_from(["acquire", "renew", "release"]), st.sampled_from(["s-a", "s-b", "s-c"]), st.integers(0, 3 * SECOND), st.integers(1, 3)),
        max_size=40,
    )
)
def test_one_holder_at_a_time_and_tokens_only_grow(steps: list[tuple[str, str, int, int]]) -> None:
    state: NamedLeaseState | None = None
    now = NOW
    last_token = 0
    for op, sid, advance, ttl in steps:
        now += advance
        c = ctx(now)
        before = state
        try:
            if op == "acquire":
                d = domain.decide_acquire("dispatcher", state, session(sid), ttl, c)
            elif op == "renew":
                d = domain.decide_renew("dispatcher", state, session(sid), ttl, c)
            else:
                d = domain.decide_release("dispatcher", state, session(sid), c)
        except DomainError as e:
            assert e.code in ("LEASE_HELD", "NOT_HOLDER")
            if e.code == "LEASE_HELD":  # refused only while another holds an unexpired lease
                assert before is not None and before.session_id not in (None, sid) and (before.expires_us or 0) > now
            continue
        state = _evolve(state, d)
        assert state is not None
        grants = [e for _, e in d.events if isinstance(e, NamedLeaseAcquired)]
        for g in grants:
            assert g.fencing_token == last_token + 1
            last_token = g.fencing_token
            # A grant never overlaps another session's unexpired lease.
            assert before is None or before.session_id in (None, sid) or (before.expires_us or 0) <= now
        if op != "release":
            assert state.session_id == sid and state.expires_us == now + ttl * SECOND
        assert state.fencing_token == last_token
