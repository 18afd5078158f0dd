"""A PostgreSQL batch's reads ahead moved by counter writes (``Batch.forget_rows_ahead``).

A write that only adds to one column of a keyed row (``Prepared(adds=…)``) moves the rows
read ahead that return that column, instead of forgetting them; any other read of the row
is forgotten, as is every read of the table when the write's row is not known; and a
command that moved a read and then failed with its writes unsent drops every read ahead.
"""

from __future__ import annotations

from sqlalchemy import text

from eventcoord.store.postgres.batch import Batch
from eventcoord.store.postgres.held_locks import guard
from eventcoord.store.postgres.rows_ahead import RowsAhead
from eventcoord.store.prepared import Prepared

_READ = Prepared(lambda d: text("SELECT 1"))
_ADDED = {"project_leases": ("unreleased", 1)}
_WRITES = frozenset({"project_leases"})


def _read(project: str, counts: bool = True) -> RowsAhead:
    return RowsAhead(
        _READ,
        (("project", project),),
        (("project_leases", ("ws", project)), ("issues", ("ws", f"{project}-1"))),
        guard("ws", f"project:{project}"),
        (("project_leases", "unreleased", 1),) if counts else (),
    )


def _batch(*held: tuple[RowsAhead, tuple[object, ...]]) -> Batch:
    b = Batch(None, 0)
    for read, row in held:
        b.hold_ahead(read, row)
    return b


def test_a_counter_write_moves_the_reads_that_return_its_column() -> None:
    p, q = _read("P"), _read("Q")
    b = _batch((p, ("rules", None, "issue")), (q, ("rules", 3, "issue")))
    b.begin_command()
    b.forget_rows_ahead(_WRITES, {"project_leases": ("ws", "P")}, False, _ADDED)
    assert b.rows_ahead == {p: ("rules", 1, "issue"), q: ("rules", 3, "issue")}
    b.forget_rows_ahead(_WRITES, {"project_leases": ("ws", "Q")}, False, {"project_leases": ("unreleased", -1)})
    assert b.rows_ahead[q] == ("rules", 2, "issue")


def test_a_read_without_the_column_or_a_write_of_unknown_rows_forgets() -> None:
    p, blind = _read("P"), _read("P", counts=False)
    b = _batch((p, ("rules", 0, "issue")), (blind, ("rules", 0, "issue")))
    b.forget_rows_ahead(_WRITES, {"project_leases": ("ws", "P")}, False, _ADDED)
    assert b.rows_ahead == {p: ("rules", 1, "issue")}
    b.forget_rows_ahead(_WRITES, None, False, _ADDED)  # which row: not known
    assert b.rows_ahead == {}


def test_a_plain_write_of_the_row_forgets_it() -> None:
    p = _read("P")
    b = _batch((p, ("rules", 0, "issue")))
    b.forget_rows_ahead(_WRITES, {"project_leases": ("ws", "P")}, False, None)
    assert b.rows_ahead == {}


def test_a_command_that_moved_a_read_and_failed_unsent_drops_every_read() -> None:
    p, q = _read("P"), _read("Q")
    b = _batch((p, ("rules", 0, "issue")), (q, ("rules", 0, "issue")))
    b.begin_command()
    b.drop_own()  # failed without moving anything: the reads still hold
    assert set(b.rows_ahead) == {p, q}
    b.begin_command()
    b.forget_rows_ahead(_WRITES, {"project_leases": ("ws", "P")}, False, _ADDED)
    b.drop_own()  # its +1 is never written
    assert b.rows_ahead == {}
