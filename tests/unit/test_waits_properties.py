"""Waiting lines, decided without a database: random waits and releases (docs/protocol.md#waiting).

The model keeps holders and lines the way the read models would after each decision, and
asks the domain (join with its deadlock check, hand-off) for every step. However the steps
fall, the wait-for graph never holds a cycle and no waiter is lost: every waiter stays in
its line until it is granted, and a line is never left behind a free issue.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.givens import ctx, session

from eventcoord.context import Draft
from eventcoord.domain import waits
from eventcoord.domain.admission import ProjectRules
from eventcoord.domain.deadlock import WaitGraph, find_cycle
from eventcoord.domain.handoff import IssueLine, hand_off_issue
from eventcoord.domain.refusals import issue_held
from eventcoord.domain.sessions import Claimant
from eventcoord.errors import DomainError
from eventcoord.events import LeaseGranted, WaitStarted

SESSIONS = [f"s-{i}" for i in range(6)]
ISSUES = [f"I-{i}" for i in range(4)]

step = st.tuples(st.sampled_from(["wait", "release"]), st.sampled_from(SESSIONS), st.sampled_from(ISSUES))


class Model:
    def __init__(self) -> None:
        self.holder: dict[str, str] = {}
        self.lines: dict[str, list[waits.Waiter]] = {i: [] for i in ISSUES}
        self.position = 0
        self.joined: set[str] = set()
        self.granted: set[str] = set()

    def graph(self) -> WaitGraph:
        g = WaitGraph()
        for issue, line in self.lines.items():
            for w in line:
                if issue in self.holder:
                    g.add(w.session_id, "issue", issue, self.holder[issue])
        return g

    def wait_of(self, sid: str) -> waits.Waiter | None:
        return next((w for line in self.lines.values() for w in line if w.session_id == sid), None)

    def wait(self, sid: str, issue: str) -> None:
        holder = self.holder.get(issue)
        if holder is None:
            self.holder[issue] = sid  # a direct claim of a free issue (nobody waits for it)
            return
        if holder == sid:
            return
        state = waits.JoinState(self.lines[issue], self.wait_of(sid), self.graph(), (holder,))
        me = session(sid)
        started = WaitStarted(kind="issue", key=issue, session_id=sid, actor_key=me.actor_key, project="P", issue=issue)
        refusal = issue_held(issue, {"session_id": holder})
        asks = waits.asks_to_join(Draft(session_id=sid), started, refusal, (holder,), self.lines[issue])
        assert asks.join is not None and asks.error is refusal and list(asks.events) == []  # joined by the handler
        try:
            d = waits.join(asks, state, ctx())
        except DomainError as e:
            assert e.code == "ALREADY_WAITING"
            return
        assert d.error is not None
        if d.error.code == "DEADLOCK":
            assert find_cycle(self.graph(), sid, "issue", issue, [holder]) is not None
            assert not any(isinstance(e, WaitStarted) for _, e in d.events)
            return
        assert d.error.code == "ISSUE_HELD"
        if any(isinstance(e, WaitStarted) for _, e in d.events):
            self.position += 1
            self.lines[issue].append(
                waits.Waiter(self.position, "issue", issue, sid, me.actor_key, 0, me, project="P", issue=issue)
            )
            self.joined.add(f"{sid}@{issue}@{self.position}")
        assert d.error.details["waiting"]["place"] == [w.session_id for w in self.lines[issue]].index(sid) + 1

    def release(self, sid: str, issue: str) -> None:
        if self.holder.get(issue) != sid:
            return
        del self.holder[issue]
        d = Draft()
        free = IssueLine(issue, "P", 0, None, ProjectRules(wip_limit=100), 0, {}, None, list(self.lines[issue]))
        w = hand_off_issue(d, free, Claimant(sid, "actor"), ctx())
        grants = [e for _, e in d.events if isinstance(e, LeaseGranted)]
        if self.lines[issue]:
            assert w is not None and w is self.lines[issue][0]  # FIFO: the first live waiter
            assert [g.session_id for g in grants] == [w.session_id] and grants[0].handed_off
            self.lines[issue].pop(0)
            self.holder[issue] = w.session_id
            self.granted.add(f"{w.session_id}@{issue}@{w.position}")
        else:
            assert w is None and grants == []

    def check(self) -> None:
        assert self.graph().cycles() == []
        for issue, line in self.lines.items():
            assert not line or issue in self.holder  # nobody waits behind a free issue
            assert len({w.session_id for w in line}) == len(line)
        in_lines = {f"{w.session_id}@{i}@{w.position}" for i, line in self.lines.items() for w in line}
        assert self.joined == in_lines | self.granted  # nobody lost
        assert len([w for line in self.lines.values() for w in line]) == len(
            {w.session_id for line in self.lines.values() for w in line}
        )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=80))
def test_random_waits_and_releases_never_leave_a_cycle_nor_lose_a_waiter(steps: list[tuple[str, str, str]]) -> None:
    m = Model()
    for kind, sid, issue in steps:
        m.wait(sid, issue) if kind == "wait" else m.release(sid, issue)
        m.check()


def test_a_three_session_cycle_names_sessions_and_resources_in_order() -> None:
    g = WaitGraph()
    g.add("a", "issue", "B", "b")
    g.add("b", "issue", "C", "c")
    cycle = find_cycle(g, "c", "issue", "A", ["a"])
    assert cycle is not None
    assert [(x["session_id"], x["key"], x["holder_session_id"]) for x in cycle] == [
        ("c", "A", "a"),
        ("a", "B", "b"),
        ("b", "C", "c"),
    ]
    assert find_cycle(g, "d", "issue", "A", ["a"]) is None
