"""Effective state of an issue (docs/protocol.md#effective-state-in-order), and the holder as it is shown."""

from __future__ import annotations

import dataclasses

from tests.unit.issue_givens import (
    ALICE_LIVE,
    ALICE_STALE,
    DECLARER,
    HUMAN_LIVE,
    HUMAN_STALE,
    ISSUE,
    LIMIT,
    ME,
    NOW,
    PROJECT,
    SECOND,
    TTL,
    claim,
    ctx,
    free_view,
    holder_obj,
    lease_of,
    refused,
    registry,
    session,
    view_held_by,
)

from eventcoord.domain.issues import (
    ClaimState,
    IssueView,
    LeaseState,
    decide_claim_issue,
    effective_state,
)

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
        st = effective_state(view_held_by(me_stale, declarers=(DECLARER,)), me_stale.session_id, ctx())
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
