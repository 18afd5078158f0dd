"""decide_claim_issue, in the order docs/protocol.md#claim_issue-in-order checks.

Liveness, own lease, human hold, holder, force, cap, grant and reclaim.
"""

from __future__ import annotations

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
    claim,
    ctx,
    free_view,
    refused,
    registry,
    session,
    types,
    view_held_by,
)

from eventcoord.domain.issues import (
    ClaimState,
    IssueView,
    decide_claim_issue,
)
from eventcoord.domain.sessions import SessionState
from eventcoord.events import LeaseGranted, LeaseReleased, MessagePosted, WipCapDenied

# ============================================================= claim_issue, in order


class TestClaimSessionNotLive:
    @pytest.mark.parametrize(
        "caller", [session("s-me", live=False), session("s-me", ended=True)], ids=["stale", "ended"]
    )
    def test_stale_or_ended_caller_is_refused_first(self, caller: SessionState) -> None:
        # given a caller that is not live, on an issue it even holds itself
        view = view_held_by(caller)
        # when it claims
        err = refused(decide_claim_issue, ClaimState(caller, view, LIMIT, 0), claim(caller.session_id), ctx())
        # then SESSION_NOT_LIVE, before anything else
        assert err.code == "SESSION_NOT_LIVE"

    def test_stale_caller_refused_even_on_a_free_issue(self) -> None:
        stale = session("s-me", live=False)
        err = refused(decide_claim_issue, ClaimState(stale, free_view(), LIMIT, 0), claim(stale.session_id), ctx())
        assert err.code == "SESSION_NOT_LIVE"


class TestClaimOwnLease:
    def test_own_lease_returns_same_token_and_appends_nothing(self) -> None:
        # given ME holds the lease with token 5
        view = view_held_by(ME, 5)
        # when ME claims again
        d = decide_claim_issue(ClaimState(ME, view, LIMIT, 1), claim(ME.session_id), ctx())
        # then the existing lease is answered, nothing appended, no error
        assert d.events == []
        assert d.error is None
        assert d.result["issue"] == ISSUE
        assert d.result["fencing_token"] == 5

    def test_own_lease_skips_the_cap_even_when_full(self) -> None:
        # given the project is at (and over) its cap
        view = view_held_by(ME, 5)
        # when ME claims its own issue
        d = decide_claim_issue(ClaimState(ME, view, LIMIT, LIMIT + 2), claim(ME.session_id), ctx())
        # then no cap check: same token, no WipCapDenied
        assert d.events == []
        assert d.error is None
        assert d.result["fencing_token"] == 5

    def test_own_lease_with_force_is_still_a_no_op(self) -> None:
        view = view_held_by(ME, 5)
        d = decide_claim_issue(ClaimState(ME, view, LIMIT, 0), claim(ME.session_id, force=True), ctx("admin"))
        assert d.events == [] and d.result["fencing_token"] == 5


class TestClaimHumanHeld:
    @pytest.mark.parametrize("human", [HUMAN_LIVE, HUMAN_STALE], ids=["live", "stale"])
    def test_human_holder_live_or_not_is_human_held(self, human: SessionState) -> None:
        # given a person holds the lease (live or stale)
        view = view_held_by(human, 2)
        # when ME claims
        err = refused(decide_claim_issue, ClaimState(ME, view, LIMIT, 0), claim(ME.session_id), ctx())
        # then HUMAN_HELD naming the holder
        assert err.code == "HUMAN_HELD"
        assert err.details == {
            "issue": ISSUE,
            "session_id": "s-human",
            "actor_key": "actor-s-human",
        }

    def test_human_held_comes_before_the_cap(self) -> None:
        err = refused(
            decide_claim_issue, ClaimState(ME, view_held_by(HUMAN_STALE), LIMIT, LIMIT), claim(ME.session_id), ctx()
        )
        assert err.code == "HUMAN_HELD"

    @pytest.mark.parametrize("human", [HUMAN_LIVE, HUMAN_STALE], ids=["live", "stale"])
    def test_agent_role_force_is_not_honoured_on_a_human_lease(self, human: SessionState) -> None:
        err = refused(
            decide_claim_issue,
            ClaimState(ME, view_held_by(human), LIMIT, 0),
            claim(ME.session_id, force=True),
            ctx("agent"),
        )
        assert err.code == "HUMAN_HELD"


class TestClaimIssueHeld:
    def test_live_holder_is_issue_held_with_holder_details(self) -> None:
        # given ALICE (live) holds the lease
        view = view_held_by(ALICE_LIVE, 3)
        # when ME claims
        err = refused(decide_claim_issue, ClaimState(ME, view, LIMIT, 0), claim(ME.session_id), ctx())
        # then ISSUE_HELD naming ALICE
        assert err.code == "ISSUE_HELD"
        assert err.details == {
            "issue": ISSUE,
            "session_id": "s-alice",
            "actor_key": "actor-s-alice",
        }

    def test_live_declarer_without_lease_is_issue_held(self) -> None:
        # given nobody leases the issue but DECLARER declares working_on it
        view = free_view(reg=registry(2), declarers=(DECLARER,))
        # when ME claims
        err = refused(decide_claim_issue, ClaimState(ME, view, LIMIT, 0), claim(ME.session_id), ctx())
        # then ISSUE_HELD naming the declarer
        assert err.code == "ISSUE_HELD"
        assert err.details == {"issue": ISSUE, "session_id": "s-decl", "actor_key": "actor-s-decl"}

    def test_issue_held_comes_before_the_cap(self) -> None:
        err = refused(
            decide_claim_issue, ClaimState(ME, view_held_by(ALICE_LIVE), LIMIT, LIMIT), claim(ME.session_id), ctx()
        )
        assert err.code == "ISSUE_HELD"

    @pytest.mark.parametrize(
        "view",
        [view_held_by(ALICE_LIVE), free_view(declarers=(DECLARER,))],
        ids=["lease", "declarer"],
    )
    def test_agent_role_force_is_not_honoured(self, view: IssueView) -> None:
        # given an agent-role token asks to force
        err = refused(
            decide_claim_issue, ClaimState(ME, view, LIMIT, 0), claim(ME.session_id, force=True), ctx("agent")
        )
        # then the force is ignored: ISSUE_HELD
        assert err.code == "ISSUE_HELD"

    def test_a_declaring_caller_alone_gets_the_grant(self) -> None:
        me_declaring = session("s-me", working_on=ISSUE)
        d = decide_claim_issue(
            ClaimState(me_declaring, free_view(declarers=(me_declaring,)), LIMIT, 0), claim("s-me"), ctx()
        )
        assert types(d) == ["LeaseGranted"] and d.result["fencing_token"] == 1

    def test_declarers_never_block_a_declaring_caller(self) -> None:
        me_declaring = session("s-me", working_on=ISSUE)
        view = free_view(declarers=(DECLARER, me_declaring))
        d = decide_claim_issue(ClaimState(me_declaring, view, LIMIT, 0), claim("s-me"), ctx())
        assert types(d) == ["LeaseGranted"]


class TestClaimForce:
    @pytest.mark.parametrize("role", ["human", "admin"])
    def test_force_by_human_or_admin_supersedes_a_live_lease(self, role: str) -> None:
        # given ALICE (live) holds the lease with token 4
        view = view_held_by(ALICE_LIVE, 4)
        # when ME claims with force under a human/admin token
        d = decide_claim_issue(ClaimState(ME, view, LIMIT, 0), claim(ME.session_id, force=True), ctx(role))
        # then ALICE's lease is released as superseded, then ME is granted token 5, and ALICE is told
        assert d.error is None
        told = d.events.pop()
        assert told[0] == "channel:agent:s-alice" and isinstance(told[1], MessagePosted)
        assert (told[1].channel, told[1].session_id) == ("agent:s-alice", "s-me")
        assert ISSUE in told[1].body and "s-me" in told[1].body and "token 5" in told[1].body
        assert d.events == [
            (
                f"issue:{ISSUE}",
                LeaseReleased(
                    issue=ISSUE,
                    session_id="s-alice",
                    reason="superseded",
                    fencing_token=4,
                    by_session_id="s-me",
                    project=PROJECT,
                ),
            ),
            (
                f"issue:{ISSUE}",
                LeaseGranted(
                    project=PROJECT,
                    issue=ISSUE,
                    session_id="s-me",
                    actor_key="actor-s-me",
                    fencing_token=5,
                ),
            ),
        ]
        assert d.result["fencing_token"] == 5
        assert "reclaimed_from" not in d.result

    @pytest.mark.parametrize("human", [HUMAN_LIVE, HUMAN_STALE], ids=["live", "stale"])
    def test_force_by_admin_supersedes_a_human_lease(self, human: SessionState) -> None:
        d = decide_claim_issue(
            ClaimState(ME, view_held_by(human, 9), LIMIT, 0), claim(ME.session_id, force=True), ctx("admin")
        )
        assert types(d) == ["LeaseReleased", "LeaseGranted", "MessagePosted"]  # the human is told
        released = d.events[0][1]
        assert isinstance(released, LeaseReleased)
        assert (released.session_id, released.reason, released.fencing_token) == (
            "s-human",
            "superseded",
            9,
        )
        assert d.result["fencing_token"] == 10

    def test_force_over_a_declarer_just_grants(self) -> None:
        d = decide_claim_issue(
            ClaimState(ME, free_view(reg=registry(2), declarers=(DECLARER,)), LIMIT, 0),
            claim(ME.session_id, force=True),
            ctx("human"),
        )
        assert types(d) == ["LeaseGranted"]
        assert d.result["fencing_token"] == 3

    def test_forced_supersede_still_respects_a_full_cap(self) -> None:
        # given the project is full elsewhere
        d = decide_claim_issue(
            ClaimState(ME, view_held_by(ALICE_LIVE, 4), LIMIT, LIMIT), claim(ME.session_id, force=True), ctx("admin")
        )
        # then the cap refuses and the live lease is left alone
        assert types(d) == ["WipCapDenied"]
        assert d.error is not None and d.error.code == "WIP_CAP_REACHED"


class TestClaimCap:
    def test_full_cap_records_exactly_one_denial_and_refuses(self) -> None:
        # given a free issue and a project with LIMIT live leases elsewhere
        view = free_view(reg=registry(2))
        # when ME claims
        d = decide_claim_issue(ClaimState(ME, view, LIMIT, LIMIT), claim(ME.session_id), ctx())
        # then exactly one WipCapDenied is appended and the answer is WIP_CAP_REACHED
        assert d.events == [
            (
                f"project:{PROJECT}",
                WipCapDenied(
                    project=PROJECT,
                    issue=ISSUE,
                    session_id="s-me",
                    actor_key="actor-s-me",
                    limit=LIMIT,
                    live_count=LIMIT,
                ),
            )
        ]
        assert d.error is not None
        assert d.error.code == "WIP_CAP_REACHED"
        assert d.error.details == {"project": PROJECT, "limit": LIMIT, "live_count": LIMIT}
        assert not d.result

    def test_refused_claim_never_expires_a_stale_lease(self) -> None:
        # given ALICE's lease is stale (reclaimable) and the project is full elsewhere
        view = view_held_by(ALICE_STALE, 6)
        # when ME claims
        d = decide_claim_issue(ClaimState(ME, view, LIMIT, LIMIT), claim(ME.session_id), ctx())
        # then only the denial is written: no LeaseReleased(expired), no grant
        assert types(d) == ["WipCapDenied"]
        assert d.error is not None and d.error.code == "WIP_CAP_REACHED"

    def test_over_the_cap_is_refused_too(self) -> None:
        d = decide_claim_issue(ClaimState(ME, free_view(), LIMIT, LIMIT + 1), claim(ME.session_id), ctx())
        assert types(d) == ["WipCapDenied"]
        assert d.error is not None and d.error.details["live_count"] == LIMIT + 1

    def test_zero_limit_admits_nothing(self) -> None:
        d = decide_claim_issue(ClaimState(ME, free_view(), 0, 0), claim(ME.session_id), ctx())
        assert types(d) == ["WipCapDenied"]
        assert d.error is not None and d.error.details == {
            "project": PROJECT,
            "limit": 0,
            "live_count": 0,
        }

    def test_one_below_the_cap_is_granted(self) -> None:
        d = decide_claim_issue(ClaimState(ME, free_view(), LIMIT, LIMIT - 1), claim(ME.session_id), ctx())
        assert d.error is None and types(d) == ["LeaseGranted"]
