"""The GitHub mirror's plan, without I/O: what it writes for given states of both sides, and
properties over random states — a second sync writes nothing, only what the mirror added is
ever removed, and a sync stopped before any step and run again ends where an unbroken one
does (nothing lost, nothing doubled)."""

from __future__ import annotations

import copy
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.github_model import Issue, World

from eventcoord.github import memory as mem
from eventcoord.github.model import (
    Coordination,
    GhComment,
    GhEdit,
    Hold,
    Holder,
    Lease,
    Notify,
    Release,
    Remember,
    Scope,
    Takeover,
)
from eventcoord.github.names import QUEUED, WIP, Logins
from eventcoord.github.plan import plan

LOGINS = Logins({"alice": "alice-gh", "claude": "claude-bot"})
SCOPE = Scope("acme/widgets", None, LOGINS)


def lease(issue: str, sid: str = "s-1", actor: str = "alice", live: bool = True, kind: str = "agent") -> Lease:
    return Lease(issue=issue, project="P", session_id=sid, actor_key=actor, fencing_token=3, live=live, kind=kind)


def world(issues: dict[int, Issue], **coordination: object) -> World:
    return World(issues, Coordination(**coordination))  # type: ignore[arg-type]


def edits(steps: tuple[object, ...]) -> list[GhEdit]:
    return [s for s in steps if isinstance(s, GhEdit)]


def test_a_live_lease_shows_wip_and_the_holders_login_and_a_queued_item_shows_ai_dev_queued() -> None:
    w = world(
        {1: Issue(set(), set()), 2: Issue({"bug"}, {"carol"}), 3: Issue(set(), set())},
        leases=(lease("P-1"), lease("repo#2", sid="s-2", actor="claude:thread-ab:host")),
        queued={"P-3": "P", "P-1": "P"},
    )
    steps = w.plan(SCOPE)
    assert edits(steps) == [
        GhEdit(1, add_labels=(WIP,), add_assignees=("alice-gh",)),
        GhEdit(2, add_labels=(WIP,), add_assignees=("claude-bot",)),
        GhEdit(3, add_labels=(QUEUED,)),
    ]
    # Each addition is remembered before its write.
    first_edit = next(i for i, s in enumerate(steps) if isinstance(s, GhEdit))
    assert steps[first_edit - 2 : first_edit] == (
        Remember(mem.Added(seq=1, n=1, label=WIP)),
        Remember(mem.Added(seq=2, n=1, assignee="alice-gh")),
    )
    w.run(steps)
    assert w.plan(SCOPE) == ()


def test_when_the_lease_ends_only_what_the_mirror_added_goes() -> None:
    w = world({2: Issue({"bug"}, {"carol"})}, leases=(lease("P-2"),))
    w.run(w.plan(SCOPE))
    assert w.issues[2].labels == {"bug", WIP} and w.issues[2].assignees == {"carol", "alice-gh"}
    w.coordination = Coordination()
    steps = w.plan(SCOPE)
    assert edits(steps) == [GhEdit(2, remove_labels=(WIP,), remove_assignees=("alice-gh",))]
    w.run(steps)
    assert w.issues[2].labels == {"bug"} and w.issues[2].assignees == {"carol"}


def test_a_wip_label_a_person_put_there_is_left_alone() -> None:
    w = world({4: Issue({WIP}, set())}, leases=(lease("P-4"),))
    assert edits(w.plan(SCOPE)) == [GhEdit(4, add_assignees=("alice-gh",))]
    w.run(w.plan(SCOPE))
    w.coordination = Coordination()
    steps = w.plan(SCOPE)
    assert edits(steps) == [GhEdit(4, remove_assignees=("alice-gh",))]  # the label stays: not the mirror's


def test_a_stale_lease_shows_nothing_but_a_persons_lease_does() -> None:
    w = world(
        {1: Issue(set(), set()), 2: Issue(set(), set())},
        leases=(lease("P-1", live=False), lease("P-2", sid="s-h", actor="boss", live=False, kind="human")),
        queued={"P-1": "P"},
    )
    assert edits(w.plan(SCOPE)) == [GhEdit(2, add_labels=(WIP,))]


def test_keys_without_an_open_issue_are_skipped_and_counted_and_others_not_mirrored() -> None:
    w = world({1: Issue(set(), set())}, leases=(lease("P-1"), lease("P-99", sid="s-2"), lease("refactor", sid="s-3")))
    p = plan(w.coordination, w.github(), w.memory(), SCOPE)
    assert p.skipped == ("P-99",)
    assert [s.number for s in edits(p.steps)] == [1]


def test_a_project_scope_mirrors_only_that_project() -> None:
    w = world(
        {1: Issue(set(), set()), 2: Issue(set(), set())},
        leases=(lease("P-1"), replace(lease("Q-2", sid="s-2"), project="Q")),
    )
    assert [e.number for e in edits(w.plan(replace(SCOPE, project="P")))] == [1]


def test_each_takeover_gets_one_comment_naming_both_holders_tokens_and_note() -> None:
    t = Takeover(
        position=40,
        issue="P-1",
        project="P",
        reason="expired",
        before=Holder("s-old", 3, "alice"),
        after=Holder("s-new", 4, "claude:thread-ab:host"),
        handoff_note="tests pass; ``` docs left @someone",
    )
    w = world({1: Issue(set(), set())}, takeovers=(t,))
    steps = w.plan(SCOPE)
    comment = next(s for s in steps if isinstance(s, GhComment))
    for part in ("`alice`", "`s-old`", "fencing token 3", "`claude:thread-ab:host`", "fencing token 4", "expired"):
        assert part in comment.body
    # The note sits in a fence longer than any it holds, so it cannot close it.
    assert "````text\ntests pass; ``` docs left @someone\n````" in comment.body
    assert steps[-1] == Remember(mem.Audited(seq=1, position=40, n=1))
    w.run(steps)
    assert w.plan(SCOPE) == ()
    assert w.memory().cursor == 40


def test_a_takeover_on_an_issue_that_is_not_open_moves_the_cursor_without_a_comment() -> None:
    t = Takeover(position=7, issue="P-9", project="P", reason="superseded", before=Holder("s-1", 1))
    w = world({1: Issue(set(), set())}, takeovers=(t,))
    steps = w.plan(SCOPE)
    assert steps == (Remember(mem.Passed(seq=1, position=7)),)


def test_a_persons_wip_on_a_free_issue_becomes_a_hold_and_its_removal_releases_it() -> None:
    w = world({7: Issue({WIP}, {"dana"})}, queued={"P-7": "P"})
    steps = w.plan(SCOPE)
    assert [s for s in steps if isinstance(s, Hold)] == [Hold(7, "dana", (("P", "P-7"),))]
    assert edits(steps) == []  # no ai-dev-queued: the hold leases it
    w.run(steps)
    assert w.plan(SCOPE) == ()
    w.issues[7].labels.clear()
    steps = w.plan(SCOPE)
    assert [type(s) for s in steps] == [Release, Remember, GhEdit]  # and the queued item shows again
    assert edits(steps) == [GhEdit(7, add_labels=(QUEUED,))]


def test_no_hold_without_a_key_a_free_issue_or_when_the_person_works_through_a_session() -> None:
    w = world({7: Issue({WIP}, {"dana"}), 8: Issue({WIP}, set())})
    p = plan(w.coordination, w.github(), w.memory(), SCOPE)
    assert not p.steps and len(p.not_held) == 2
    assert [s for s in plan(w.coordination, w.github(), w.memory(), replace(SCOPE, project="P")).steps] == [
        Hold(7, "dana", (("P", "P-7"),))
    ]
    busy = replace(w.coordination, leases=(lease("P-7", live=False),))
    assert plan(busy, w.github(), w.memory(), replace(SCOPE, project="P")).steps == ()
    declared = replace(w.coordination, declared=frozenset({"P-7"}))
    assert plan(declared, w.github(), w.memory(), replace(SCOPE, project="P")).steps == ()
    at_work = replace(w.coordination, live_actors=frozenset({"dana"}))
    assert (
        plan(at_work, w.github(), w.memory(), replace(SCOPE, project="P", logins=Logins({"dana": "dana"}))).steps == ()
    )


def test_a_persons_wip_on_an_agents_issue_is_told_once_never_taken() -> None:
    w = world({3: Issue({WIP}, {"erin"})}, leases=(lease("P-3", sid="s-9", actor="bob"),))
    steps = w.plan(SCOPE)
    assert [type(s) for s in steps] == [Notify, GhComment, Remember]
    assert isinstance(steps[0], Notify) and steps[0].session_id == "s-9"
    assert "@erin" in steps[1].body  # type: ignore[union-attr]
    assert not any(isinstance(s, Hold | Release) for s in steps)
    w.run(steps)
    assert w.plan(SCOPE) == ()


# --- properties --------------------------------------------------------------------------

NUMBERS = [1, 2, 3, 4]
KEYS = [f"P-{n}" for n in NUMBERS] + ["repo#2", "misc"]
ACTORS = ["alice", "bob", "claude:thread-ab:h", "github:dana"]
PEOPLE = ["alice-gh", "carol", "dana", "erin"]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    open_numbers = draw(st.sets(st.sampled_from(NUMBERS)))
    issues = {
        n: Issue(set(draw(st.sets(st.sampled_from([WIP, QUEUED, "bug"])))), set(draw(st.sets(st.sampled_from(PEOPLE)))))
        for n in sorted(open_numbers)
    }
    leased = draw(st.lists(st.sampled_from(KEYS), unique=True))
    leases = []
    for i, key in enumerate(leased):
        actor = draw(st.sampled_from(ACTORS))
        kind = "human" if actor.startswith("github:") else draw(st.sampled_from(["agent", "agent", "human"]))
        leases.append(
            Lease(key, "P", f"s-{i}", actor, draw(st.integers(1, 5)), draw(st.booleans()), kind)  # type: ignore[arg-type]
        )
    positions = sorted(draw(st.sets(st.integers(1, 60), max_size=4)))
    takeovers = tuple(
        Takeover(
            position=p,
            issue=draw(st.sampled_from(KEYS)),
            project="P",
            reason=draw(st.sampled_from(["expired", "superseded"])),
            before=Holder(f"s-old{p}", 1, "alice"),
            after=draw(st.none() | st.just(Holder(f"s-new{p}", 2, "bob"))),
            handoff_note=draw(st.none() | st.text(max_size=20)),
        )
        for p in positions
    )
    coordination = Coordination(
        leases=tuple(leases),
        queued={k: "P" for k in draw(st.sets(st.sampled_from(KEYS)))},
        live_actors=frozenset(draw(st.sets(st.sampled_from(ACTORS)))),
        declared=frozenset(draw(st.sets(st.sampled_from(KEYS), max_size=1))),
        takeovers=takeovers,
        released_to=max(positions, default=0),
    )
    start = mem.Memory(
        labels=frozenset((n, x) for n in NUMBERS for x in draw(st.sets(st.sampled_from([WIP, QUEUED])))),
        assignees=frozenset((n, a) for n in NUMBERS for a in draw(st.sets(st.sampled_from(PEOPLE), max_size=1))),
        cursor=draw(st.sampled_from([0, 10, 30])),
    )
    return World(issues, coordination, start=start)


scopes = st.sampled_from([SCOPE, replace(SCOPE, project="P"), replace(SCOPE, logins=Logins({"bob": "erin"}))])


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), scopes)
def test_a_second_sync_with_nothing_new_writes_nothing(w: World, scope: Scope) -> None:
    w.run(w.plan(scope))
    assert w.plan(scope) == ()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), scopes)
def test_only_what_the_mirror_added_is_ever_removed(w: World, scope: Scope) -> None:
    memory = w.memory()
    for e in edits(w.plan(scope)):
        assert all(memory.owns_label(e.number, x) for x in e.remove_labels)
        assert all(memory.owns_assignee(e.number, a) for a in e.remove_assignees)
        assert set(e.add_labels) <= {WIP, QUEUED}


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), scopes, st.data())
def test_a_sync_stopped_at_any_write_and_run_again_loses_nothing_and_doubles_nothing(
    w: World, scope: Scope, data: st.DataObject
) -> None:
    whole = copy.deepcopy(w)
    whole.run(whole.plan(scope))
    steps = w.plan(scope)
    # Stopped where a write failed (or the process died just before it): every step before
    # it was made, that one and the rest were not. Only the moment between a comment and
    # the record of it is excluded: a comment cannot be read back, so it would be posted again.
    stops = [
        i
        for i, s in enumerate(steps)
        if not (isinstance(s, Remember) and isinstance(s.record, mem.Audited | mem.Noted))
    ]
    if not stops:
        return
    stop = data.draw(st.sampled_from(stops))
    w.run(steps[:stop])
    w.run(w.plan(scope))
    assert w.shown() == whole.shown()
    assert w.notices == whole.notices
    assert w.plan(scope) == ()
