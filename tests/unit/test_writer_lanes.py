"""Which writer's line a command joins (``store/writer_lanes.py``)."""

from __future__ import annotations

from eventcoord import commands as c
from eventcoord.handlers import read_ahead
from eventcoord.store.writer_lanes import Lane, affinity, choose


def _lane_of(lanes: list[Lane], cmd: c.Command) -> int:
    return lanes.index(choose(lanes, read_ahead("ws", cmd)))


def test_commands_that_first_lock_one_row_join_one_line() -> None:
    """Claims and pulls of one project, every file command of a workspace, and one
    session's heartbeats: each kind always to the same of two writers."""
    lanes = [Lane(), Lane()]
    same = [
        [c.ClaimIssue(session_id=f"s{i}", project="P", issue=f"P-{i}") for i in range(20)],
        [c.ClaimNextWork(session_id=f"s{i}", project="P") for i in range(20)],
        [c.ClaimFiles(session_id=f"s{i}", issue=f"I-{i}", paths=[f"{i}.py"]) for i in range(20)]
        + [c.ReleaseFiles(session_id=f"s{i}", issue=f"I-{i}") for i in range(20)],
        [c.HeartbeatAgent(session_id="s1") for _ in range(5)] + [c.EndAgent(session_id="s1")],
    ]
    for group in same:
        assert len({_lane_of(lanes, cmd) for cmd in group}) == 1, group
    # a claim and a pull of one project lock the same guard first
    assert affinity(read_ahead("ws", same[0][0])) == affinity(read_ahead("ws", same[1][0]))


def test_projects_spread_over_the_lines() -> None:
    lanes = [Lane(), Lane()]
    used = {_lane_of(lanes, c.ClaimIssue(session_id="s", project=f"P{i}", issue="x")) for i in range(64)}
    assert used == {0, 1}


def test_a_command_that_locks_nothing_first_joins_the_shortest_line() -> None:
    lanes = [Lane(), Lane()]
    lanes[0].pending.extend([object(), object()])
    assert choose(lanes, read_ahead("ws", c.RegisterAgent(actor="a"))) is lanes[1]
    lanes[1].pending.extend([object()] * 3)
    assert choose(lanes, None) is lanes[0]


def test_one_writer_takes_everything() -> None:
    lanes = [Lane()]
    for cmd in (c.RegisterAgent(actor="a"), c.ClaimIssue(session_id="s", project="P", issue="x")):
        assert choose(lanes, read_ahead("ws", cmd)) is lanes[0]
