"""Unit tests of the issue tier's pure decisions (no database).

``effective_state``, ``decide_claim_issue``, ``decide_release_issue`` and ``decide_verify_hold`` are
fed SessionState / IssueView / LeaseState / IssueState values built by hand and a
``Context`` with a fixed clock, and checked against SPEC §1 (Issue lease, Effective
state, Guard points, Takeover) and §5 (claim_issue / Effective state / verify_hold
orders, Handoff, Error details). Each test reads given / when / then.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest

from eventcoord.commands import ClaimIssue, ConfigureProject, ReleaseIssue, VerifyHold
from eventcoord.context import Caller, Context, Decision
from eventcoord.domain.issues import (
    ClaimState,
    IssueState,
    IssueView,
    LeaseState,
    ReleaseState,
    VerifyState,
    decide_claim_issue,
    decide_configure_project,
    decide_release_issue,
    decide_verify_hold,
    effective_state,
    grant_for_work,
)
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError
from eventcoord.events import LeaseGranted, LeaseReleased, ProjectConfigured, WipCapDenied

# ------------------------------------------------------------------------------ givens

NOW = 1_700_000_000_000_000  # the database clock, in microseconds
TTL = 120
SECOND = 1_000_000
ISSUE = "ISS-1"
PROJECT = "proj"
LIMIT = 3


def ctx(role: str = "agent", *, now: int = NOW) -> Context:
    return Context(Caller("ws", role), now, TTL)  # type: ignore[arg-type]


def session(
    session_id: str,
    *,
    live: bool = True,
    ended: bool = False,
    kind: str = "agent",
    source: str = "explicit-override",
    actor_key: str | None = None,
    working_on: str | None = None,
) -> SessionState:
    """A session seen 1 s ago (live) or TTL + 1 s ago (stale); optionally ended."""
    stable = source == "explicit-override" or source.startswith("runtime-session-id:")
    last_seen = NOW - SECOND if live else NOW - (TTL + 1) * SECOND
    return SessionState(
        session_id=session_id,
        actor_key=actor_key if actor_key is not None else f"actor-{session_id}",
        kind=kind,
        stable=stable,
        identity_source=source,
        host="host-1",
        last_seen_us=last_seen,
        ended_us=(NOW - 2 * SECOND) if ended else None,
        working_on=working_on,
    )


def lease_of(
    holder: SessionState, token: int, *, issue: str = ISSUE, project: str = PROJECT
) -> LeaseState:
    return LeaseState(
        issue=issue,
        project=project,
        session_id=holder.session_id,
        actor_key=holder.actor_key,
        fencing_token=token,
    )


def registry(
    last_token: int, *, project: str = PROJECT, note: str | None = None, note_by: str | None = None
) -> IssueState:
    return IssueState(
        issue=ISSUE,
        project=project,
        last_fencing_token=last_token,
        handoff_note=note,
        handoff_session_id=note_by,
    )


def view_held_by(
    holder: SessionState,
    token: int = 1,
    *,
    note: str | None = None,
    declarers: tuple[SessionState, ...] = (),
) -> IssueView:
    """An issue whose unreleased lease (token ``token``, the last one granted) is ``holder``'s."""
    return IssueView(
        ISSUE,
        registry(token, note=note, note_by=holder.session_id if note else None),
        lease_of(holder, token),
        holder,
        declarers,
    )


def free_view(
    *, reg: IssueState | None = None, declarers: tuple[SessionState, ...] = ()
) -> IssueView:
    return IssueView(ISSUE, reg, None, None, declarers)


def claim(session_id: str, *, force: bool = False, project: str = PROJECT) -> ClaimIssue:
    return ClaimIssue(session_id=session_id, project=project, issue=ISSUE, force=force)


def verify(session_id: str, token: int | None = None) -> VerifyHold:
    return VerifyHold(session_id=session_id, issue=ISSUE, fencing_token=token)


def holder_obj(s: SessionState, live: bool) -> dict[str, Any]:
    return {"session_id": s.session_id, "actor_key": s.actor_key, "kind": s.kind, "live": live}


def refused(fn: Any, *args: Any) -> DomainError:
    with pytest.raises(DomainError) as info:
        fn(*args)
    return info.value


def types(d: Decision) -> list[str]:
    return [type(e).__name__ for _, e in d.events]


# Cast of sessions used throughout.
ME = session("s-me")
ALICE_LIVE = session("s-alice")
ALICE_STALE = session("s-alice", live=False)
HUMAN_LIVE = session("s-human", kind="human")
HUMAN_STALE = session("s-human", kind="human", live=False)
DECLARER = session("s-decl", working_on=ISSUE)


# ============================================================== effective state (table)


class TestEffectiveStateRows:
    def test_no_lease_no_declarer_is_free(self) -> None:
        # given an issue never claimed and nobody declaring it
        view = free_view()
        # when ME looks at it
        st = effective_state(view, ME.session_id, ctx())
        # then it is free, with no holder
        assert (st.state, st.reason, st.holder) == ("free", "no_assignment_no_liveness", None)

    def test_registered_but_released_issue_is_free(self) -> None:
        # given an issue that was granted before (token 7) and released since
        view = free_view(reg=registry(7, note="left off at step 2"))
        # when / then it is free
        st = effective_state(view, ME.session_id, ctx())
        assert (st.state, st.reason, st.holder) == ("free", "no_assignment_no_liveness", None)

    def test_own_live_lease_is_self_is_holder(self) -> None:
        # given ME holds the lease and is live
        view = view_held_by(ME)
        # when ME looks
        st = effective_state(view, ME.session_id, ctx())
        # then it is mine
        assert (st.state, st.reason) == ("self_is_holder", "assignment_self")
        assert st.holder == holder_obj(ME, live=True)

    def test_own_stale_lease_is_still_self_is_holder(self) -> None:
        # given ME holds the lease but has gone stale
        me_stale = session("s-me", live=False)
        view = view_held_by(me_stale)
        # when ME looks
        st = effective_state(view, me_stale.session_id, ctx())
        # then it is still mine (own lease live or not), the holder shown as not live
        assert (st.state, st.reason) == ("self_is_holder", "assignment_self")
        assert st.holder == holder_obj(me_stale, live=False)

    def test_live_human_holder_is_human_held(self) -> None:
        st = effective_state(view_held_by(HUMAN_LIVE), ME.session_id, ctx())
        assert (st.state, st.reason) == ("human_held", "human_assignment")
        assert st.holder == holder_obj(HUMAN_LIVE, live=True)

    def test_stale_human_holder_is_still_human_held_never_reclaimable(self) -> None:
        # given a person holds the lease but has not been seen for longer than the TTL
        view = view_held_by(HUMAN_STALE)
        # when ME looks
        st = effective_state(view, ME.session_id, ctx())
        # then it is human_held, not reclaimable: a person is asked first
        assert (st.state, st.reason) == ("human_held", "human_assignment")
        assert st.holder == holder_obj(HUMAN_STALE, live=False)

    def test_live_other_holder_is_held_assignment_fresh_other(self) -> None:
        st = effective_state(view_held_by(ALICE_LIVE), ME.session_id, ctx())
        assert (st.state, st.reason) == ("held", "assignment_fresh_other")
        assert st.holder == holder_obj(ALICE_LIVE, live=True)

    def test_stale_other_holder_is_reclaimable(self) -> None:
        st = effective_state(view_held_by(ALICE_STALE), ME.session_id, ctx())
        assert (st.state, st.reason) == ("reclaimable", "assignment_holder_stale")
        assert st.holder == holder_obj(ALICE_STALE, live=False)

    def test_ended_other_holder_is_reclaimable(self) -> None:
        alice_ended = session("s-alice", ended=True)
        st = effective_state(view_held_by(alice_ended), ME.session_id, ctx())
        assert (st.state, st.reason) == ("reclaimable", "assignment_holder_stale")
        assert st.holder is not None and st.holder["live"] is False

    def test_lease_whose_holder_session_is_unknown_is_reclaimable(self) -> None:
        # given a lease whose holder session cannot be loaded
        view = IssueView(ISSUE, registry(1), lease_of(ALICE_LIVE, 1), None, ())
        # when ME looks
        st = effective_state(view, ME.session_id, ctx())
        # then nobody live holds it: reclaimable, attributed from the lease itself
        assert (st.state, st.reason) == ("reclaimable", "assignment_holder_stale")
        assert st.holder == {
            "session_id": "s-alice",
            "actor_key": "actor-s-alice",
            "kind": "agent",
            "live": False,
        }

    def test_live_declarer_without_lease_is_held_liveness_lagging(self) -> None:
        # given nobody leases the issue but DECLARER (live) declares working_on it
        view = free_view(declarers=(DECLARER,))
        # when ME looks
        st = effective_state(view, ME.session_id, ctx())
        # then someone is working it now, not yet durably claimed
        assert (st.state, st.reason) == ("held", "liveness_claim_present_assignment_lagging")
        assert st.holder == holder_obj(DECLARER, live=True)

    def test_a_declarer_does_not_block_itself(self) -> None:
        # given the only declarer of the issue is the caller
        me_declaring = session("s-me", working_on=ISSUE)
        view = free_view(declarers=(me_declaring,))
        # when it looks
        st = effective_state(view, me_declaring.session_id, ctx())
        # then the issue is free for it
        assert (st.state, st.reason, st.holder) == ("free", "no_assignment_no_liveness", None)

    def test_declarers_never_block_declarers(self) -> None:
        # given ME and DECLARER both declare working_on the issue, and nobody leases it
        me_declaring = session("s-me", working_on=ISSUE)
        view = free_view(declarers=(DECLARER, me_declaring))
        # when ME (itself a declarer) looks
        st = effective_state(view, me_declaring.session_id, ctx())
        # then the other declarer does not block it
        assert (st.state, st.reason, st.holder) == ("free", "no_assignment_no_liveness", None)

    def test_anonymous_view_sees_a_live_lease_as_held(self) -> None:
        st = effective_state(view_held_by(ALICE_LIVE), None, ctx())
        assert (st.state, st.reason) == ("held", "assignment_fresh_other")

    def test_liveness_boundary_is_exclusive_of_the_ttl(self) -> None:
        # given ALICE was last seen exactly TTL ago, and BOB one microsecond later
        alice = dataclasses.replace(ALICE_LIVE, last_seen_us=NOW - TTL * SECOND)
        bob = dataclasses.replace(session("s-bob"), last_seen_us=NOW - TTL * SECOND + 1)
        # when ME looks at their leases
        # then ALICE is stale (reclaimable) and BOB is live (held)
        assert effective_state(view_held_by(alice), ME.session_id, ctx()).state == "reclaimable"
        assert effective_state(view_held_by(bob), ME.session_id, ctx()).state == "held"


class TestEffectiveStatePrecedence:
    def test_own_lease_beats_human_kind(self) -> None:
        # given the caller is itself a human session holding the lease
        me_human = session("s-me", kind="human")
        st = effective_state(view_held_by(me_human), me_human.session_id, ctx())
        # then it is self_is_holder, not human_held
        assert st.state == "self_is_holder"

    def test_own_stale_lease_beats_live_declarer(self) -> None:
        me_stale = session("s-me", live=False)
        st = effective_state(
            view_held_by(me_stale, declarers=(DECLARER,)), me_stale.session_id, ctx()
        )
        assert (st.state, st.reason) == ("self_is_holder", "assignment_self")

    def test_human_holder_beats_liveness_even_when_stale(self) -> None:
        # given a stale human lease and a live declarer
        st = effective_state(view_held_by(HUMAN_STALE, declarers=(DECLARER,)), ME.session_id, ctx())
        # then human_held wins over reclaimable and over the declarer
        assert (st.state, st.reason) == ("human_held", "human_assignment")

    def test_live_holder_beats_declarer(self) -> None:
        st = effective_state(view_held_by(ALICE_LIVE, declarers=(DECLARER,)), ME.session_id, ctx())
        assert (st.state, st.reason) == ("held", "assignment_fresh_other")
        assert st.holder is not None and st.holder["session_id"] == "s-alice"

    def test_stale_holder_beats_declarer(self) -> None:
        st = effective_state(view_held_by(ALICE_STALE, declarers=(DECLARER,)), ME.session_id, ctx())
        assert (st.state, st.reason) == ("reclaimable", "assignment_holder_stale")
        assert st.holder is not None and st.holder["session_id"] == "s-alice"


class TestHolderSanitisedAtConstruction:
    HOSTILE = "evil\x1b[31m\x07\x00 bob\x7f\x85\x9f\n\tx"
    CLEAN = "evil[31m bobx"

    def test_lease_holder_actor_key_control_characters_are_stripped(self) -> None:
        # given a holder session whose actor key carries C0, DEL and C1 characters
        hostile = session("s-alice", actor_key=self.HOSTILE)
        # when ME looks at the issue
        st = effective_state(view_held_by(hostile), ME.session_id, ctx())
        # then the holder object is already clean
        assert st.holder is not None
        assert st.holder["actor_key"] == self.CLEAN
        assert st.holder == {
            "session_id": "s-alice",
            "actor_key": self.CLEAN,
            "kind": "agent",
            "live": True,
        }

    def test_lease_actor_key_is_sanitised_when_the_holder_session_is_unknown(self) -> None:
        lease = LeaseState(ISSUE, PROJECT, "s-ghost", self.HOSTILE, 4)
        st = effective_state(IssueView(ISSUE, registry(4), lease, None, ()), ME.session_id, ctx())
        assert st.holder is not None and st.holder["actor_key"] == self.CLEAN

    def test_declarer_holder_actor_key_is_sanitised(self) -> None:
        hostile = session("s-decl", actor_key=self.HOSTILE, working_on=ISSUE)
        st = effective_state(free_view(declarers=(hostile,)), ME.session_id, ctx())
        assert st.holder is not None and st.holder["actor_key"] == self.CLEAN

    def test_refusal_details_carry_the_sanitised_actor_key(self) -> None:
        hostile = session("s-alice", actor_key=self.HOSTILE)
        err = refused(decide_claim_issue, ClaimState(ME, view_held_by(hostile), LIMIT, 0), claim(ME.session_id), ctx())
        assert err.code == "ISSUE_HELD"
        assert err.details["actor_key"] == self.CLEAN


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
        err = refused(decide_claim_issue, ClaimState(ME, view_held_by(HUMAN_STALE), LIMIT, LIMIT), claim(ME.session_id), ctx())
        assert err.code == "HUMAN_HELD"

    @pytest.mark.parametrize("human", [HUMAN_LIVE, HUMAN_STALE], ids=["live", "stale"])
    def test_agent_role_force_is_not_honoured_on_a_human_lease(self, human: SessionState) -> None:
        err = refused(decide_claim_issue, ClaimState(ME, view_held_by(human), LIMIT, 0), claim(ME.session_id, force=True), ctx("agent"))
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
        err = refused(decide_claim_issue, ClaimState(ME, view_held_by(ALICE_LIVE), LIMIT, LIMIT), claim(ME.session_id), ctx())
        assert err.code == "ISSUE_HELD"

    @pytest.mark.parametrize(
        "view",
        [view_held_by(ALICE_LIVE), free_view(declarers=(DECLARER,))],
        ids=["lease", "declarer"],
    )
    def test_agent_role_force_is_not_honoured(self, view: IssueView) -> None:
        # given an agent-role token asks to force
        err = refused(decide_claim_issue, ClaimState(ME, view, LIMIT, 0), claim(ME.session_id, force=True), ctx("agent"))
        # then the force is ignored: ISSUE_HELD
        assert err.code == "ISSUE_HELD"

    def test_a_declaring_caller_alone_gets_the_grant(self) -> None:
        me_declaring = session("s-me", working_on=ISSUE)
        d = decide_claim_issue(ClaimState(me_declaring, free_view(declarers=(me_declaring,)), LIMIT, 0), claim("s-me"), ctx())
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
        # then ALICE's lease is released as superseded, then ME is granted token 5
        assert d.error is None
        assert d.events == [
            (
                f"issue:{ISSUE}",
                LeaseReleased(
                    issue=ISSUE,
                    session_id="s-alice",
                    reason="superseded",
                    fencing_token=4,
                    by_session_id="s-me",
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
        d = decide_claim_issue(ClaimState(ME, view_held_by(human, 9), LIMIT, 0), claim(ME.session_id, force=True), ctx("admin"))
        assert types(d) == ["LeaseReleased", "LeaseGranted"]
        released = d.events[0][1]
        assert isinstance(released, LeaseReleased)
        assert (released.session_id, released.reason, released.fencing_token) == (
            "s-human",
            "superseded",
            9,
        )
        assert d.result["fencing_token"] == 10

    def test_force_over_a_declarer_just_grants(self) -> None:
        d = decide_claim_issue(ClaimState(ME, free_view(reg=registry(2), declarers=(DECLARER,)), LIMIT, 0), claim(ME.session_id, force=True), ctx("human"))
        assert types(d) == ["LeaseGranted"]
        assert d.result["fencing_token"] == 3

    def test_forced_supersede_still_respects_a_full_cap(self) -> None:
        # given the project is full elsewhere
        d = decide_claim_issue(ClaimState(ME, view_held_by(ALICE_LIVE, 4), LIMIT, LIMIT), claim(ME.session_id, force=True), ctx("admin"))
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


class TestClaimGrantAndReclaim:
    def test_free_issue_is_granted_token_one(self) -> None:
        # given an issue never claimed
        d = decide_claim_issue(ClaimState(ME, free_view(), LIMIT, 0), claim(ME.session_id), ctx())
        # then one LeaseGranted with token 1
        assert d.error is None
        assert d.events == [
            (
                f"issue:{ISSUE}",
                LeaseGranted(
                    project=PROJECT,
                    issue=ISSUE,
                    session_id="s-me",
                    actor_key="actor-s-me",
                    fencing_token=1,
                ),
            )
        ]
        assert d.result["issue"] == ISSUE
        assert d.result["fencing_token"] == 1
        assert d.result["handoff_note"] is None
        assert "reclaimed_from" not in d.result

    def test_token_is_last_plus_one(self) -> None:
        # given the issue's last grant carried token 41 and it was released since
        d = decide_claim_issue(ClaimState(ME, free_view(reg=registry(41)), LIMIT, 0), claim(ME.session_id), ctx())
        assert d.result["fencing_token"] == 42
        granted = d.events[-1][1]
        assert isinstance(granted, LeaseGranted) and granted.fencing_token == 42

    def test_grant_answers_the_pending_handoff_note(self) -> None:
        # given the previous holder left a note when it released
        view = free_view(reg=registry(3, note="resume at migration step 4", note_by="s-alice"))
        d = decide_claim_issue(ClaimState(ME, view, LIMIT, 0), claim(ME.session_id), ctx())
        assert d.result["handoff_note"] == "resume at migration step 4"

    def test_stale_holder_is_reclaimed_in_one_command(self) -> None:
        # given ALICE holds the lease (token 6) but went stale, leaving a handoff note
        view = view_held_by(ALICE_STALE, 6, note="tests green, PR not opened")
        # when ME claims
        d = decide_claim_issue(ClaimState(ME, view, LIMIT, 0), claim(ME.session_id), ctx())
        # then ALICE's lease is released as expired (both named), and ME is granted token 7
        assert d.error is None
        assert d.events == [
            (
                f"issue:{ISSUE}",
                LeaseReleased(
                    issue=ISSUE,
                    session_id="s-alice",
                    reason="expired",
                    fencing_token=6,
                    by_session_id="s-me",
                ),
            ),
            (
                f"issue:{ISSUE}",
                LeaseGranted(
                    project=PROJECT,
                    issue=ISSUE,
                    session_id="s-me",
                    actor_key="actor-s-me",
                    fencing_token=7,
                ),
            ),
        ]
        # and the answer hands over the previous holder and its note
        assert d.result["fencing_token"] == 7
        assert d.result["reclaimed_from"] == {
            "session_id": "s-alice",
            "actor_key": "actor-s-alice",
            "handoff_note": "tests green, PR not opened",
        }

    def test_ended_holder_is_reclaimed_without_note(self) -> None:
        d = decide_claim_issue(ClaimState(ME, view_held_by(session("s-alice", ended=True), 2), LIMIT, 0), claim(ME.session_id), ctx())
        assert types(d) == ["LeaseReleased", "LeaseGranted"]
        released = d.events[0][1]
        assert isinstance(released, LeaseReleased) and released.reason == "expired"
        assert d.result["reclaimed_from"] == {
            "session_id": "s-alice",
            "actor_key": "actor-s-alice",
            "handoff_note": None,
        }

    def test_reclaim_is_admitted_when_only_its_own_stale_lease_would_fill_the_cap(self) -> None:
        # given live_count excludes the stale lease on this same issue
        d = decide_claim_issue(ClaimState(ME, view_held_by(ALICE_STALE, 1), LIMIT, LIMIT - 1), claim(ME.session_id), ctx())
        assert types(d) == ["LeaseReleased", "LeaseGranted"]

    def test_issue_of_another_project_is_a_validation_error(self) -> None:
        # given the issue was first claimed under project "other"
        view = free_view(reg=registry(1, project="other"))
        # when ME claims it naming PROJECT
        err = refused(decide_claim_issue, ClaimState(ME, view, LIMIT, 0), claim(ME.session_id, project=PROJECT), ctx())
        # then 422 VALIDATION naming the field
        assert err.code == "VALIDATION"
        assert err.status == 422
        assert err.details == {"field": "project"}

    def test_fencing_tokens_strictly_increase_across_successive_grants(self) -> None:
        # given a sequence of grants: ME takes it, goes stale, BOB reclaims, an admin forces,
        # the admin releases, then ME takes it again
        bob = session("s-bob")
        boss = session("s-boss", kind="human")
        tokens: list[int] = []

        def grant_view(
            reg: IssueState | None, holder: SessionState | None, token: int | None
        ) -> IssueView:
            lease = lease_of(holder, token) if holder is not None and token is not None else None
            return IssueView(ISSUE, reg, lease, holder, ())

        def token_of(d: Decision) -> int:
            assert d.error is None
            granted = d.events[-1][1]
            assert isinstance(granted, LeaseGranted)
            assert granted.fencing_token == d.result["fencing_token"]
            return granted.fencing_token

        d1 = decide_claim_issue(ClaimState(ME, grant_view(None, None, None), LIMIT, 0), claim("s-me"), ctx())
        tokens.append(token_of(d1))
        me_stale = session("s-me", live=False)
        d2 = decide_claim_issue(ClaimState(bob, grant_view(registry(tokens[-1]), me_stale, tokens[-1]), LIMIT, 0), claim("s-bob"), ctx())
        tokens.append(token_of(d2))
        d3 = decide_claim_issue(ClaimState(boss, grant_view(registry(tokens[-1]), bob, tokens[-1]), LIMIT, 0), claim("s-boss", force=True), ctx("human"))
        tokens.append(token_of(d3))
        d4 = decide_claim_issue(ClaimState(ME, grant_view(registry(tokens[-1]), None, None), LIMIT, 0), claim("s-me"), ctx())
        tokens.append(token_of(d4))
        # then every grant carries last + 1
        assert tokens == [1, 2, 3, 4]
        assert all(a < b for a, b in itertools.pairwise(tokens))


# ================================================================= release_issue


class TestRelease:
    @pytest.mark.parametrize("reason", ["released", "completed"])
    def test_holder_releases_with_its_reason(self, reason: str) -> None:
        # given ME holds the lease with token 3
        lease = lease_of(ME, 3)
        # when ME releases
        d = decide_release_issue(ReleaseState(ME, lease), ReleaseIssue(session_id="s-me", issue=ISSUE, reason=reason), ctx())
        # then one LeaseReleased on the issue stream
        assert d.events == [
            (
                f"issue:{ISSUE}",
                LeaseReleased(issue=ISSUE, session_id="s-me", reason=reason, fencing_token=3),
            )
        ]
        assert d.error is None

    def test_non_holder_is_refused(self) -> None:
        # given ALICE holds the lease
        err = refused(decide_release_issue, ReleaseState(ME, lease_of(ALICE_LIVE, 3)), ReleaseIssue(session_id="s-me", issue=ISSUE), ctx())
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

    @pytest.mark.parametrize(
        "source", ["explicit-override", "runtime-session-id:codex", *UNSTABLE_SOURCES]
    )
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
    def test_unstable_identity_passes_advisory_even_when_another_holds_it(
        self, source: str, view: IssueView
    ) -> None:
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
        assert grant.events == [(f"issue:{ISSUE}", LeaseGranted(project=PROJECT, issue=ISSUE, session_id="s-me", actor_key=ME.actor_key, fencing_token=5))]

    def test_a_stale_holder_is_released_as_expired_first(self) -> None:
        stale = session("s-bob", live=False)
        grant = grant_for_work(view_held_by(stale, 2), ME, PROJECT, LIMIT, self.count(0), ctx())
        assert grant is not None and types_of(grant.events) == ["LeaseReleased", "LeaseGranted"]
        released = grant.events[0][1]
        assert released == LeaseReleased(issue=ISSUE, session_id="s-bob", reason="expired", fencing_token=2, by_session_id="s-me")

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
        assert grant_for_work(free_view(reg=registry(1, project="other")), ME, PROJECT, LIMIT, self.count(0), ctx()) is None
        full = self.count(LIMIT)
        assert grant_for_work(free_view(), ME, PROJECT, LIMIT, full, ctx()) is None
        assert full.asked == [LIMIT]


def types_of(events: list[Any]) -> list[str]:
    return [type(e).__name__ for _, e in events]


def test_configure_project_records_the_limit() -> None:
    d = decide_configure_project(None, ConfigureProject(project=PROJECT, wip_limit=7), ctx("admin"))
    assert d.events == [(f"project:{PROJECT}", ProjectConfigured(project=PROJECT, wip_limit=7))]
    assert d.result == {"project": PROJECT, "wip_limit": 7}
