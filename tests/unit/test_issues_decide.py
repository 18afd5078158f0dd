"""Unit tests of the issue tier's pure decisions (no database).

``effective_state``, ``decide_claim_issue``, ``decide_release_issue`` and ``decide_verify_hold`` are
fed SessionState / IssueView / LeaseState / IssueState values built by hand and a
``Context`` with a fixed clock, and checked against docs/protocol.md#concepts (Issue lease,
Effective state, Guard points, Takeover) and docs/protocol.md#rules (the orders of
claim_issue, effective state and verify_hold, handoff notes, error details). Each test
reads given / when / then. Effective state and claim_issue have their own modules
(test_issues_state.py, test_issues_claim.py); the givens are in issue_givens.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.issue_givens import (
    ALICE_LIVE,
    ALICE_STALE,
    DECLARER,
    HUMAN_LIVE,
    HUMAN_STALE,
    ISSUE,
    LIMIT,
    ME,
    PROJECT,
    ctx,
    free_view,
    lease_of,
    refused,
    registry,
    session,
    verify,
    view_held_by,
)

from eventcoord.commands import ConfigureProject, ReleaseIssue
from eventcoord.domain.issues import (
    IssueView,
    ReleaseState,
    VerifyState,
    decide_configure_project,
    decide_release_issue,
    decide_verify_hold,
    grant_for_work,
)
from eventcoord.events import LeaseGranted, LeaseReleased, ProjectConfigured

# ================================================================= release_issue


class TestRelease:
    @pytest.mark.parametrize("reason", ["released", "completed"])
    def test_holder_releases_with_its_reason(self, reason: str) -> None:
        # given ME holds the lease with token 3
        lease = lease_of(ME, 3)
        # when ME releases
        d = decide_release_issue(
            ReleaseState(ME, lease), ReleaseIssue(session_id="s-me", issue=ISSUE, reason=reason), ctx()
        )
        # then one LeaseReleased on the issue stream
        assert d.events == [
            (
                f"issue:{ISSUE}",
                LeaseReleased(issue=ISSUE, session_id="s-me", reason=reason, fencing_token=3, project=PROJECT),
            )
        ]
        assert d.error is None

    def test_non_holder_is_refused(self) -> None:
        # given ALICE holds the lease
        err = refused(
            decide_release_issue,
            ReleaseState(ME, lease_of(ALICE_LIVE, 3)),
            ReleaseIssue(session_id="s-me", issue=ISSUE),
            ctx(),
        )
        # then NOT_HOLDER
        assert err.code == "NOT_HOLDER"

    def test_release_of_an_unleased_issue_is_not_holder(self) -> None:
        err = refused(decide_release_issue, ReleaseState(ME, None), ReleaseIssue(session_id="s-me", issue=ISSUE), ctx())
        assert err.code == "NOT_HOLDER"


# =================================================================== verify_hold


UNSTABLE_SOURCES = ["process-ancestry", "unresolved"]


class TestVerifyHoldOrder:
    @pytest.mark.parametrize("source", ["explicit-override", *UNSTABLE_SOURCES])
    def test_ended_session_is_not_live(self, source: str) -> None:
        # given ME holds the lease but has ended
        me_ended = session("s-me", ended=True, source=source)
        err = refused(decide_verify_hold, VerifyState(me_ended, view_held_by(me_ended, 2)), verify("s-me", 2), ctx())
        assert err.code == "SESSION_NOT_LIVE"

    @pytest.mark.parametrize("source", ["explicit-override", "runtime-session-id:codex", *UNSTABLE_SOURCES])
    def test_obsolete_token_is_not_fresh_whatever_the_identity(self, source: str) -> None:
        # given ME held token 1, was superseded, and BOB now holds token 2
        me = session("s-me", source=source)
        view = view_held_by(session("s-bob"), 2)
        # when ME presents its old token
        err = refused(decide_verify_hold, VerifyState(me, view), verify("s-me", 1), ctx())
        # then NOT_FRESH_HOLDER, even for an unstable identity
        assert err.code == "NOT_FRESH_HOLDER"

    @pytest.mark.parametrize("source", ["explicit-override", *UNSTABLE_SOURCES])
    def test_someone_elses_current_token_is_not_fresh(self, source: str) -> None:
        me = session("s-me", source=source)
        err = refused(decide_verify_hold, VerifyState(me, view_held_by(session("s-bob"), 2)), verify("s-me", 2), ctx())
        assert err.code == "NOT_FRESH_HOLDER"

    @pytest.mark.parametrize("source", ["explicit-override", *UNSTABLE_SOURCES])
    def test_wrong_token_on_own_lease_is_not_fresh(self, source: str) -> None:
        me = session("s-me", source=source)
        err = refused(decide_verify_hold, VerifyState(me, view_held_by(me, 5)), verify("s-me", 4), ctx())
        assert err.code == "NOT_FRESH_HOLDER"

    @pytest.mark.parametrize("source", UNSTABLE_SOURCES)
    def test_token_on_an_unleased_issue_is_not_fresh(self, source: str) -> None:
        me = session("s-me", source=source)
        err = refused(decide_verify_hold, VerifyState(me, free_view(reg=registry(1))), verify("s-me", 1), ctx())
        assert err.code == "NOT_FRESH_HOLDER"


ADVISORY = {
    "ok": True,
    "enforced": False,
    "effective_state": "not_evaluated",
    "reason": "actor-identity-unstable-advisory-only",
}


class TestVerifyHoldUnstableIdentityIsAdvisory:
    @pytest.mark.parametrize("source", UNSTABLE_SOURCES)
    @pytest.mark.parametrize(
        "view",
        [
            view_held_by(ALICE_LIVE, 2),
            view_held_by(ALICE_STALE, 2),
            view_held_by(HUMAN_LIVE, 2),
            free_view(declarers=(DECLARER,)),
            free_view(),
        ],
        ids=["other-live-holder", "reclaimable", "human-held", "declarer", "free"],
    )
    def test_unstable_identity_passes_advisory_even_when_another_holds_it(self, source: str, view: IssueView) -> None:
        # given ME's identity is unstable (process ancestry / unresolved) and another session
        # may hold the lease (the CI false-block case)
        me = session("s-me", source=source)
        assert me.stable is False
        # when ME verifies its hold without a token
        d = decide_verify_hold(VerifyState(me, view), verify("s-me"), ctx())
        # then it passes, advisory only, and appends nothing
        assert d.result == ADVISORY
        assert d.events == [] and d.error is None

    @pytest.mark.parametrize("source", UNSTABLE_SOURCES)
    def test_unstable_identity_with_current_token_is_advisory(self, source: str) -> None:
        me = session("s-me", source=source)
        d = decide_verify_hold(VerifyState(me, view_held_by(me, 3)), verify("s-me", 3), ctx())
        assert d.result == ADVISORY and d.events == []


class TestVerifyHoldStableIdentityEnforces:
    @pytest.mark.parametrize("source", ["explicit-override", "runtime-session-id:claude"])
    def test_liveness_only_hold_passes_enforced(self, source: str) -> None:
        # given nobody leases the issue; DECLARER declares working_on it (no durable conflict)
        me = session("s-me", source=source)
        view = free_view(declarers=(DECLARER,))
        # when stable ME verifies
        d = decide_verify_hold(VerifyState(me, view), verify("s-me"), ctx())
        # then it passes, enforced (the second false-block case)
        assert d.result == {
            "ok": True,
            "enforced": True,
            "effective_state": "held",
            "reason": "liveness_claim_present_assignment_lagging",
        }
        assert d.events == []

    def test_superseded_by_a_live_holder_is_not_fresh(self) -> None:
        # given ME was superseded: BOB (live) now holds the lease
        view = view_held_by(session("s-bob"), 2)
        # when stable ME verifies without a token
        err = refused(decide_verify_hold, VerifyState(ME, view), verify("s-me"), ctx())
        # then NOT_FRESH_HOLDER naming the durable conflict
        assert err.code == "NOT_FRESH_HOLDER"
        assert err.details["effective_state"] == "held"
        assert err.details["reason"] == "assignment_fresh_other"

    @pytest.mark.parametrize(
        ("view", "state"),
        [
            (view_held_by(ALICE_STALE, 2), "reclaimable"),
            (view_held_by(HUMAN_LIVE, 2), "human_held"),
            (view_held_by(HUMAN_STALE, 2), "human_held"),
        ],
        ids=["reclaimable", "human-live", "human-stale"],
    )
    def test_reclaimable_or_human_held_is_not_fresh(self, view: IssueView, state: str) -> None:
        err = refused(decide_verify_hold, VerifyState(ME, view), verify("s-me"), ctx())
        assert err.code == "NOT_FRESH_HOLDER"
        assert err.details["effective_state"] == state

    @pytest.mark.parametrize("token", [None, 5])
    def test_own_lease_passes_enforced(self, token: int | None) -> None:
        # given ME holds the lease with token 5
        d = decide_verify_hold(VerifyState(ME, view_held_by(ME, 5)), verify("s-me", token), ctx())
        # then ok, enforced, self_is_holder
        assert d.result == {
            "ok": True,
            "enforced": True,
            "effective_state": "self_is_holder",
            "reason": "assignment_self",
        }
        assert d.events == []

    def test_stale_but_not_ended_holder_still_passes(self) -> None:
        # given ME holds the lease but is stale (not ended): only an ended session is refused
        me_stale = session("s-me", live=False)
        d = decide_verify_hold(VerifyState(me_stale, view_held_by(me_stale, 5)), verify("s-me", 5), ctx())
        assert d.result["ok"] is True and d.result["effective_state"] == "self_is_holder"

    def test_free_issue_passes_enforced(self) -> None:
        d = decide_verify_hold(VerifyState(ME, free_view(reg=registry(3))), verify("s-me"), ctx())
        assert d.result == {
            "ok": True,
            "enforced": True,
            "effective_state": "free",
            "reason": "no_assignment_no_liveness",
        }
        assert d.events == []


# ================================================================= grant_for_work (the queue's pull)


class TestGrantForWork:
    def count(self, n: int) -> Any:
        asked: list[int] = []

        def live() -> int:
            asked.append(n)
            return n

        live.asked = asked  # type: ignore[attr-defined]
        return live

    def test_a_free_issue_is_granted_with_the_next_token(self) -> None:
        live = self.count(0)
        grant = grant_for_work(free_view(reg=registry(4)), ME, PROJECT, LIMIT, live, ctx())
        assert grant is not None and grant.fencing_token == 5
        assert grant.events == [
            (
                f"issue:{ISSUE}",
                LeaseGranted(project=PROJECT, issue=ISSUE, session_id="s-me", actor_key=ME.actor_key, fencing_token=5),
            )
        ]

    def test_a_stale_holders_issue_is_not_free_so_a_pull_skips_it(self) -> None:
        # Guard points (docs/protocol.md#concepts): selection never hands out an issue that
        # is not free; a reclaimable lease is claim_issue's explicit takeover.
        stale = session("s-bob", live=False)
        live = self.count(0)
        assert grant_for_work(view_held_by(stale, 2), ME, PROJECT, LIMIT, live, ctx()) is None
        assert live.asked == []

    def test_a_lease_the_pulls_recovery_released_is_released_as_expired_first(self) -> None:
        stale = session("s-bob", live=False)
        grant = grant_for_work(view_held_by(stale, 2), ME, PROJECT, LIMIT, self.count(0), ctx(), recovered=True)
        assert grant is not None and types_of(grant.events) == ["LeaseReleased", "LeaseGranted"]
        released = grant.events[0][1]
        assert released == LeaseReleased(
            issue=ISSUE, session_id="s-bob", reason="expired", fencing_token=2, by_session_id="s-me", project=PROJECT
        )

    def test_the_callers_own_lease_is_kept_without_events_or_a_cap_count(self) -> None:
        live = self.count(LIMIT)
        grant = grant_for_work(view_held_by(ME, 3), ME, PROJECT, LIMIT, live, ctx())
        assert grant is not None and (grant.fencing_token, grant.events) == (3, [])
        assert live.asked == []

    def test_held_human_held_declared_other_project_and_full_cap_are_skipped(self) -> None:
        human = session("s-h", kind="human", live=False)
        declared = free_view(declarers=(session("s-bob"),))
        for view in (view_held_by(session("s-bob")), view_held_by(human), declared):
            live = self.count(0)
            assert grant_for_work(view, ME, PROJECT, LIMIT, live, ctx()) is None
            assert live.asked == []  # the cap is not even counted
        assert (
            grant_for_work(free_view(reg=registry(1, project="other")), ME, PROJECT, LIMIT, self.count(0), ctx())
            is None
        )
        full = self.count(LIMIT)
        assert grant_for_work(free_view(), ME, PROJECT, LIMIT, full, ctx()) is None
        assert full.asked == [LIMIT]


def types_of(events: list[Any]) -> list[str]:
    return [type(e).__name__ for _, e in events]


def test_configure_project_records_the_limit() -> None:
    d = decide_configure_project(None, ConfigureProject(project=PROJECT, wip_limit=7), ctx("admin"))
    assert d.events == [(f"project:{PROJECT}", ProjectConfigured(project=PROJECT, wip_limit=7))]
    assert d.result == {"project": PROJECT, "wip_limit": 7}
