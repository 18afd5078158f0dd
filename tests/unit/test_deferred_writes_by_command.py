"""A batch's deferred writes, told apart by the command that deferred them.

``send_deferred`` sends the writes of a batch that deferred many as one statement per
command, and one ``executemany`` per shape of command. So ``DeferredWrites.by_command``
must give every write once, in order, split exactly where a command began, after any
sequence of commands that defer writes, defer none, or fail (their writes dropped), and
after the batch sends what it deferred.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from eventcoord.store.postgres.deferred_writes import DeferredWrites


@dataclass(frozen=True)
class Write:
    """A prebuilt statement as the index reads it: it writes one table."""

    sql: str
    tables: frozenset[str] = frozenset({"leases"})
    writes_to: frozenset[str] | None = frozenset({"leases"})
    life_only: bool = False


def write(n: int) -> tuple[Write, list[int], None]:
    return Write(f"w{n}"), [n], None


def test_writes_split_where_each_command_began() -> None:
    d = DeferredWrites()
    d.begin_command()  # nothing deferred yet: no empty group
    d.append(*write(1))
    d.append(*write(2))
    d.begin_command()
    d.append(*write(3))
    d.begin_command()  # a command that defers nothing
    d.begin_command()
    d.append(*write(4))
    d.append(*write(5))
    assert [[a for _, a, _ in g] for g in d.by_command()] == [[[1], [2]], [[3]], [[4], [5]]]
    d.truncate(3)  # the running command failed: its writes go, the others' stay apart
    d.begin_command()
    d.append(*write(6))
    assert [[a for _, a, _ in g] for g in d.by_command()] == [[[1], [2]], [[3]], [[6]]]
    d.clear()  # sent
    assert list(d.by_command()) == []
    d.append(*write(7))
    assert [[a for _, a, _ in g] for g in d.by_command()] == [[[7]]]


#: A command: how many writes it defers, and whether it fails after them (they are dropped).
commands = st.lists(st.tuples(st.integers(0, 4), st.booleans()), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(commands, min_size=1, max_size=4))
def test_by_command_matches_the_commands_that_kept_their_writes(passes: list[list[tuple[int, bool]]]) -> None:
    d = DeferredWrites()
    n = 0
    for commands_ in passes:  # each pass ends with its writes sent
        expected: list[list[int]] = []
        for count, fails in commands_:
            own = len(d)  # as Batch.begin_command marks it
            d.begin_command()
            mine = []
            for _ in range(count):
                n += 1
                d.append(*write(n))
                mine.append(n)
            if fails:
                d.truncate(own)
            elif mine:
                expected.append(mine)
        assert [[a[0] for _, a, _ in g] for g in d.by_command()] == expected
        assert [a[0] for _, a, _ in d] == [x for g in expected for x in g]
        d.clear()
