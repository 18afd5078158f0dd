"""The index of a batch's deferred writes answers as the write-by-write check it replaced.

``DeferredWrites.apart`` finds, by table and by hashed key, whether a statement touches a
row a deferred write may change. The reference below is the check it replaced: every
deferred write against the statement, one by one. Random writes and statements (plain
keys, ranges, unkeyed writes, writes of unknown tables, signs of life and the statements
that read around them), before and after dropping a command's own writes, must get the
same answer from both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from eventcoord.store.key_spans import KeySpans
from eventcoord.store.postgres.deferred_writes import DeferredWrites, Entry, rows_meet


@dataclass(frozen=True)
class Statement:
    """What ``apart`` reads of a prebuilt statement (``prepared._Pg``)."""

    tables: frozenset[str]
    writes_to: frozenset[str] | None
    life_only: bool = False
    session_facts: bool = False
    counts_pending_life: bool = False


def reference(deferred: list[Entry], pg: Statement, keys: dict[str, tuple[Any, ...]] | None) -> bool:
    """The check one write at a time (``prepared._apart`` before the index)."""
    for d, _, d_keys in deferred:
        if d.writes_to is None:
            return False
        for table in d.writes_to & pg.tables:
            if table == "sessions" and pg.session_facts:
                if d.life_only:
                    continue
                return False
            if keys is None or d_keys is None:
                return False
            if table == "sessions" and pg.counts_pending_life and not d.life_only:
                return False
            mine, theirs = keys.get(table), d_keys.get(table)
            if mine is None or theirs is None or rows_meet(mine, theirs):
                return False
    return True


TABLES = ("leases", "issues", "sessions", "file_claims")
names = st.sampled_from(("a", "b", "c", "d"))
spans = st.lists(st.tuples(names, names).filter(lambda s: s[0] < s[1]), min_size=1, max_size=2).map(KeySpans)
key = st.one_of(
    st.tuples(names),
    st.tuples(names, names),
    st.tuples(spans),
    st.tuples(names, spans),
    st.tuples(st.lists(names, max_size=2)),  # unhashable: a list among the values
)
tables = st.frozensets(st.sampled_from(TABLES), min_size=1, max_size=3)


@st.composite
def keyed(draw: st.DrawFn, touched: frozenset[str]) -> dict[str, tuple[Any, ...]] | None:
    if draw(st.integers(0, 9)) == 0:
        return None  # names no rows
    return {t: draw(key) for t in touched if draw(st.integers(0, 5)) > 0}


@st.composite
def writes(draw: st.DrawFn) -> Entry:
    touched = draw(tables)
    life = touched == {"sessions"} and draw(st.booleans())
    pg = Statement(touched, None if draw(st.integers(0, 19)) == 0 else touched, life_only=life)
    return (pg, [], draw(keyed(touched)))


@st.composite
def statements(draw: st.DrawFn) -> tuple[Statement, dict[str, tuple[Any, ...]] | None]:
    touched = draw(tables)
    pg = Statement(
        touched,
        draw(st.sampled_from((frozenset(), touched))),
        session_facts="sessions" in touched and draw(st.booleans()),
        counts_pending_life=draw(st.booleans()),
    )
    return pg, draw(keyed(touched))


@settings(max_examples=400, deadline=None)
@given(st.lists(writes(), max_size=8), st.lists(statements(), min_size=1, max_size=4), st.integers(0, 8))
def test_apart_answers_as_the_check_of_every_deferred_write(
    deferred: list[Entry], probes: list[tuple[Statement, Any]], own: int
) -> None:
    index = DeferredWrites(deferred)
    assert len(index) == len(deferred) and list(index) == deferred
    for pg, keys in probes:
        assert index.apart(pg, keys) is reference(deferred, pg, keys)
    index.truncate(own)  # a failed command's own writes dropped
    for pg, keys in probes:
        assert index.apart(pg, keys) is reference(deferred[:own], pg, keys)
    index.clear()
    assert not index and all(index.apart(pg, keys) for pg, keys in probes)


def test_a_write_of_the_same_row_is_found_among_many() -> None:
    """The case the index exists for: many claims' writes deferred, one more of a row among them."""
    lease = Statement(frozenset({"leases"}), frozenset({"leases"}))
    index = DeferredWrites((lease, [], {"leases": ("w", f"I-{i}")}) for i in range(200))
    assert index.apart(lease, {"leases": ("w", "I-200")})
    assert not index.apart(lease, {"leases": ("w", "I-137")})
    assert not index.apart(lease, {"leases": (KeySpans([("I-1", "I-2")]),)})
    assert not index.apart(lease, None)


def test_signs_of_life_go_with_the_reads_that_count_them_and_other_writes_of_sessions_do_not() -> None:
    sign = Statement(frozenset({"sessions"}), frozenset({"sessions"}), life_only=True)
    end = Statement(frozenset({"sessions"}), frozenset({"sessions"}))
    counting = Statement(frozenset({"sessions", "leases"}), frozenset(), counts_pending_life=True)
    facts = Statement(frozenset({"sessions"}), frozenset(), session_facts=True)
    mine = {"sessions": ("s1",), "leases": ("w", "I-1")}
    for writes_, pg, keys, apart in [
        ([(sign, [], {"sessions": ("s2",)})], counting, mine, True),  # another's sign of life
        ([(sign, [], {"sessions": ("s1",)})], counting, mine, False),  # its own
        ([(end, [], {"sessions": ("s2",)})], counting, mine, False),  # another's end: who is live
        ([(sign, [], {"sessions": ("s1",)})], facts, None, True),  # facts no sign of life changes
        ([(end, [], {"sessions": ("s2",)})], facts, None, False),
    ]:
        assert DeferredWrites(writes_).apart(pg, keys) is apart is reference(writes_, pg, keys)
