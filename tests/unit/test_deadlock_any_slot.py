"""A named lease's waiter needs any one slot (docs/protocol.md#deadlock), decided without I/O.

A wait for a lease is stuck only while every holder is stuck behind the caller, and never
while a slot is free; waits for issues and paths need every holder, as before. The worklist
that finds who is stuck agrees with the definition computed the slow way on random graphs.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from eventcoord.domain.deadlock import ANY_OF, WaitGraph, find_cycle


def test_one_holder_of_two_slots_waiting_for_me_is_no_deadlock() -> None:
    g = WaitGraph()
    g.add("a", "issue", "I-1", "c")  # a holds a slot and waits for c; b holds the other
    assert find_cycle(g, "c", "lease", "gpu", ["a", "b"]) is None
    g.add("b", "issue", "I-2", "c")
    cycle = find_cycle(g, "c", "lease", "gpu", ["a", "b"])
    assert cycle is not None
    assert [(x["session_id"], x["key"], x["holder_session_id"]) for x in cycle] == [
        ("c", "gpu", "a"),
        ("a", "I-1", "c"),
    ]


def test_a_lease_waiter_on_the_way_is_stuck_only_when_all_its_holders_are() -> None:
    g = WaitGraph()
    g.add("x", "lease", "gpu", "c")  # x waits for a slot held by c or y
    g.add("x", "lease", "gpu", "y")
    assert find_cycle(g, "c", "issue", "I-1", ["x"]) is None  # y may release: x moves, then c
    g.add("y", "issue", "I-2", "c")
    cycle = find_cycle(g, "c", "issue", "I-1", ["x"])
    assert cycle is not None and [x["session_id"] for x in cycle][:2] == ["c", "x"]
    assert [x["holder_session_id"] for x in cycle] == [x["session_id"] for x in cycle[1:]] + ["c"]


def test_a_lease_waiter_with_a_free_slot_is_never_stuck() -> None:
    g = WaitGraph()
    g.add("x", "lease", "gpu", "c")  # one holder, and a free slot (capacity 2)
    g.add_free("x")
    assert find_cycle(g, "c", "issue", "I-1", ["x"]) is None


def test_a_files_waiter_is_stuck_when_any_holder_is() -> None:
    g = WaitGraph()
    g.add("x", "files", "src/a.py", "c")
    g.add("x", "files", "src/b.py", "y")
    assert find_cycle(g, "c", "issue", "I-1", ["x"]) is not None


PEOPLE = [f"s{i}" for i in range(6)]
wait = st.tuples(st.sampled_from(["issue", "files", "lease"]), st.sets(st.sampled_from(PEOPLE), max_size=3))


def _stuck_the_slow_way(g: WaitGraph, me: str) -> set[str]:
    """The definition, iterated until nothing changes."""
    stuck = {me}
    changed = True
    while changed:
        changed = False
        for s, edges in g.edges.items():
            if s in stuck or s in g.free or not edges:
                continue
            holders = {h for _, _, h in edges}
            if (all if edges[0][0] in ANY_OF else any)(h in stuck for h in holders):
                stuck.add(s)
                changed = True
    return stuck


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(PEOPLE), wait), st.sets(st.sampled_from(PEOPLE)), st.sampled_from(PEOPLE))
def test_who_is_stuck_is_the_least_fixed_point(waits: dict[str, tuple[str, set[str]]], free: set[str], me: str) -> None:
    g = WaitGraph()
    for waiter, (kind, holders) in waits.items():
        for h in sorted(holders):
            g.add(waiter, kind, "r", h)
        if kind == "lease" and waiter in free:
            g.add_free(waiter)
    why = g.stuck_behind(me)
    assert set(why) == _stuck_the_slow_way(g, me)
    for s, edge in why.items():  # each points at a holder stuck before it, back to me
        assert (edge is None) == (s == me)
        if edge is not None:
            assert edge[2] in why and edge in g.edges[s]


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(PEOPLE), st.sets(st.sampled_from(PEOPLE), max_size=3)), st.sampled_from(PEOPLE))
def test_waits_for_issues_are_refused_exactly_when_a_holder_reaches_me(waits: dict[str, set[str]], me: str) -> None:
    """Without leases, a deadlock is what it always was: a path from a holder back to me."""
    g = WaitGraph()
    for waiter, holders in waits.items():
        for h in sorted(holders):
            g.add(waiter, "issue", "r", h)
    holders = [p for p in PEOPLE if p != me][:2]
    reaches = any(g.path(h, me) is not None for h in holders)
    cycle = find_cycle(g, me, "issue", "I", holders)
    assert (cycle is not None) == reaches
    if cycle is not None:  # a real cycle: each entry's holder is the next entry's session, back to me
        assert [x["holder_session_id"] for x in cycle] == [x["session_id"] for x in cycle[1:]] + [me]
