"""decide_claim_issue's grants: fencing tokens, the pending handoff note, reclaiming a stale or ended holder."""

from __future__ import annotations

import itertools

from tests.unit.issue_givens import (
    ALICE_STALE,
    ISSUE,
    LIMIT,
    ME,
    PROJECT,
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

from eventcoord.context import Decision
from eventcoord.domain.issues import (
    ClaimState,
    IssueState,
    IssueView,
    decide_claim_issue,
)
from eventcoord.domain.sessions import SessionState
from eventcoord.events import LeaseGranted, LeaseReleased

# ============================================================= claim_issue, in order


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
        d = decide_claim_issue(
            ClaimState(ME, view_held_by(session("s-alice", ended=True), 2), LIMIT, 0), claim(ME.session_id), ctx()
        )
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
        d = decide_claim_issue(
            ClaimState(ME, view_held_by(ALICE_STALE, 1), LIMIT, LIMIT - 1), claim(ME.session_id), ctx()
        )
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

        def grant_view(reg: IssueState | None, holder: SessionState | None, token: int | None) -> IssueView:
            lease = lease_of(holder, token) if holder is not None and token is not None else None
            return IssueView(ISSUE, reg, lease, holder, ())

        def token_of(d: Decision) -> int:
            assert d.error is None
            # exactly one grant (a forced takeover also tells the holder who loses it, after it)
            (granted,) = [e for _, e in d.events if isinstance(e, LeaseGranted)]
            assert granted.fencing_token == d.result["fencing_token"]
            return granted.fencing_token

        d1 = decide_claim_issue(ClaimState(ME, grant_view(None, None, None), LIMIT, 0), claim("s-me"), ctx())
        tokens.append(token_of(d1))
        me_stale = session("s-me", live=False)
        d2 = decide_claim_issue(
            ClaimState(bob, grant_view(registry(tokens[-1]), me_stale, tokens[-1]), LIMIT, 0), claim("s-bob"), ctx()
        )
        tokens.append(token_of(d2))
        d3 = decide_claim_issue(
            ClaimState(boss, grant_view(registry(tokens[-1]), bob, tokens[-1]), LIMIT, 0),
            claim("s-boss", force=True),
            ctx("human"),
        )
        tokens.append(token_of(d3))
        d4 = decide_claim_issue(
            ClaimState(ME, grant_view(registry(tokens[-1]), None, None), LIMIT, 0), claim("s-me"), ctx()
        )
        tokens.append(token_of(d4))
        # then every grant carries last + 1
        assert tokens == [1, 2, 3, 4]
        assert all(a < b for a, b in itertools.pairwise(tokens))
