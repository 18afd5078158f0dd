"""A PostgreSQL batch's reads ahead of ranges (file claims' probes) and the writes that
forget them (``Batch.forget_rows_ahead``).

A read that names its rows by ranges of an indexed key (``KeySpans``) is forgotten by a
write whose rows, named by keys of that index, may lie in one of its ranges, and kept
otherwise; a write of rows named another way (an issue's claims) cannot be told apart from
a range and forgets every such read, unless it also says where its rows lie; a write of
unknown rows forgets them all. Reads of
ranges are looked up by value: the command builds its read again to find its rows.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

from eventcoord.store.key_spans import KeySpans, SpansIndex
from eventcoord.store.postgres.batch import Batch
from eventcoord.store.postgres.rows_ahead import RowsAhead
from eventcoord.store.prepared import Prepared

_READ = Prepared(lambda d: text("SELECT 1"))
_WRITES = frozenset({"file_claims"})


def _probes(*ranges: tuple[str, str]) -> RowsAhead:
    return RowsAhead(
        _READ,
        (("lo", tuple(lo for lo, _ in ranges)), ("hi", tuple(hi for _, hi in ranges))),
        (("sessions", ("s1",)), ("file_claims", (KeySpans(ranges),))),
        ("workspaces", "ws"),
        spread=("lo", "hi"),
        many=True,
    )


def _batch(*reads: RowsAhead) -> Batch:
    b = Batch(None, 0)
    for read in reads:
        b.hold_ahead(read, (("row",),))
    return b


def _at(*keys: str) -> dict[str, tuple[object, ...]]:
    return {"file_claims": (KeySpans.points(keys),)}


def test_a_claim_s_insert_forgets_only_the_reads_whose_ranges_hold_its_keys() -> None:
    src, doc = _probes(("src/", "src0")), _probes(("doc/", "doc0"), ("", "\x01"))
    b = _batch(src, doc)
    b.forget_rows_ahead(_WRITES, _at("lib/x.py"), False)
    assert set(b.rows_ahead) == {src, doc}
    b.forget_rows_ahead(_WRITES, _at("src/a.py"), False)
    assert set(b.rows_ahead) == {doc}
    b.forget_rows_ahead(_WRITES, _at(""), False)  # the exact probe of '' holds it
    assert b.rows_ahead == {}


def test_a_write_of_rows_named_otherwise_or_unknown_forgets_every_read_of_ranges() -> None:
    src = _probes(("src/", "src0"))
    b = _batch(src)
    b.forget_rows_ahead(frozenset({"leases"}), {"leases": ("ws", "I-1")}, False)  # another table
    assert set(b.rows_ahead) == {src}
    b.forget_rows_ahead(_WRITES, {"file_claims": ("ws\x01I-1",)}, False)  # an issue's claims
    assert b.rows_ahead == {}
    b = _batch(src)
    b.forget_rows_ahead(_WRITES, None, False)
    assert b.rows_ahead == {}


def test_a_write_named_otherwise_that_says_where_its_rows_lie_forgets_only_the_reads_it_meets() -> None:
    """A release names its rows by their issue (``rows``) and says their live keys
    (``Prepared(at_spans=…)``): reads of ranges are compared with those."""
    src, doc = _probes(("src/", "src0")), _probes(("doc/", "doc0"))
    b = _batch(src, doc)
    released = {"file_claims": KeySpans.points(["src/a.py"])}
    b.forget_rows_ahead(_WRITES, {"file_claims": ("ws\x01I-1",)}, False, None, released)
    assert set(b.rows_ahead) == {doc}


def test_a_read_of_ranges_is_found_by_an_equal_one() -> None:
    b = _batch(_probes(("src/", "src0")))
    assert b.rows_ahead.get(_probes(("src/", "src0"))) == (("row",),)
    assert _probes(("src/", "src0")) != _probes(("src/", "src1"))


keys = st.text(alphabet="ab/\x01", max_size=4)


@given(
    st.lists(st.tuples(keys, keys).filter(lambda r: r[0] < r[1]), min_size=1, max_size=3),
    st.lists(keys, min_size=1, max_size=3),
)
def test_a_read_is_kept_exactly_when_no_key_written_lies_in_its_ranges(
    ranges: list[tuple[str, str]], written: list[str]
) -> None:
    read = _probes(*ranges)
    b = _batch(read)
    b.forget_rows_ahead(_WRITES, _at(*written), False)
    inside = any(lo <= k < hi for k in written for lo, hi in ranges)
    assert (read in b.rows_ahead) == (not inside)


# A span's two ends, distinct and in order (drawn so, not filtered: a filter that threw away
# half the pairs failed hypothesis's health check now and then)
span_lists = st.lists(
    st.lists(keys, min_size=2, max_size=2, unique=True).map(lambda ends: (min(ends), max(ends))), min_size=1, max_size=4
)


@given(span_lists, span_lists)
def test_spans_meet_exactly_when_some_key_may_lie_in_both(
    mine: list[tuple[str, str]], theirs: list[tuple[str, str]]
) -> None:
    """``KeySpans.meets`` (its early exits on sorted spans) against every pair compared."""
    expected = any(lo < o_hi and o_lo < hi for lo, hi in mine for o_lo, o_hi in theirs)
    assert KeySpans(mine).meets(KeySpans(theirs)) == expected
    assert KeySpans(theirs).meets(KeySpans(mine)) == expected


@given(st.lists(span_lists, min_size=1, max_size=12), st.lists(st.lists(keys, min_size=1, max_size=3), max_size=4))
def test_writes_forget_exactly_the_reads_their_keys_lie_in(
    reads: list[list[tuple[str, str]]], writes: list[list[str]]
) -> None:
    """Many reads of ranges and several writes in turn (``SpansIndex`` finds them): a read
    is kept exactly when no key written so far lies in one of its ranges."""
    held = [_probes(*ranges) for ranges in reads]
    b = _batch(*held)
    for n, written in enumerate(writes):
        b.forget_rows_ahead(_WRITES, _at(*written), False)
        so_far = [k for w in writes[: n + 1] for k in w]
        kept = {
            r
            for r, ranges in zip(held, reads, strict=True)
            if not any(lo <= k < hi for k in so_far for lo, hi in ranges)
        }
        assert set(b.rows_ahead) == kept


@given(span_lists, span_lists)
def test_an_index_finds_the_spans_that_meet(mine: list[tuple[str, str]], theirs: list[tuple[str, str]]) -> None:
    index = SpansIndex([(KeySpans([span]), n) for n, span in enumerate(mine)])
    expected = {n for n, (lo, hi) in enumerate(mine) if any(lo < o_hi and o_lo < hi for o_lo, o_hi in theirs)}
    found = index.meeting(KeySpans(theirs))
    assert sorted(found) == sorted(expected)
