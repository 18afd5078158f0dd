"""A pull walks only the items it may take: none on an issue another session holds.

A pull never takes an item on an issue another session holds, live or stale
(``grant_for_work``). Since 0016 the database passed those items as it walked the project's
ready items, probing each one's issue for a lease, but it still walked them: behind 2,000
such items a pull took 2.3 ms on SQLite and 8 ms on PostgreSQL, against 0.4 / 2.4 ms behind
none (bench/history.py --tiers, ``claim_next_work (behind held)``). The read model now
keeps, on each queued item, who holds its issue:

* ``work_items.held_by``: the session of the unreleased lease on the item's issue, for a
  queued item (NULL: none, the item has no issue, or it is not queued). The queue
  projection keeps it (projections/queue.py): a lease's grant sets it on the issue's queued
  items and a release clears it; an item enqueued or re-queued reads it from the issue's
  lease, and one claimed or finished drops it.
* The indexes a pull walks leave those items out. PostgreSQL's live key is
  ``…\\x01queued`` for a ready item no one holds and ``…\\x01held\\x01<session>`` for one a
  session holds, so a pull reads two keys of ``ix_work_items_live_key``: the items no one
  holds and its own. SQLite's ``ix_work_items_ready`` holds ready items no one holds, and
  the new ``ix_work_items_held`` (workspace, project, held_by, pull order) those a session
  holds.
* A grant or a release finds its issue's queued items by one index:
  ``ix_work_items_queued_on_issue`` (PostgreSQL: on the key ``workspace \\x01 issue`` of a
  queued item; SQLite: (workspace, issue), partial on queued items with an issue).

The column is filled in here as a replay of the log would leave it.

Revision ID: 0017_queue_held
Revises: 0016_queue_ready
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_queue_held"
down_revision: str | Sequence[str] | None = "0016_queue_ready"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_READY = "status = 'queued' AND waiting_on = 0"
_ACTIVE = "WHEN status IN ('claimed', 'running') THEN workspace || E'\\x01' || project || E'\\x01active'"
_LIVE_KEY_BEFORE = f"CASE WHEN {_READY} THEN workspace || E'\\x01' || project || E'\\x01queued' {_ACTIVE} END"
_LIVE_KEY = (
    f"CASE WHEN {_READY} AND held_by IS NULL THEN workspace || E'\\x01' || project || E'\\x01queued'"
    f" WHEN {_READY} THEN workspace || E'\\x01' || project || E'\\x01held\\x01' || held_by {_ACTIVE} END"
)
_ON_ISSUE_KEY = "CASE WHEN status = 'queued' AND issue IS NOT NULL THEN workspace || E'\\x01' || issue END"
_QUEUED_ON_ISSUE = "status = 'queued' AND issue IS NOT NULL"


def _pg_live_key(key: str) -> None:
    op.execute("DROP INDEX ix_work_items_live_key")
    op.execute(
        f"CREATE INDEX ix_work_items_live_key ON work_items (({key}), priority DESC, enqueued_position)"
        f" WHERE ({key}) IS NOT NULL"
    )


def _sqlite_ready(where: str) -> None:
    op.drop_index("ix_work_items_ready", table_name="work_items")
    op.create_index(
        "ix_work_items_ready",
        "work_items",
        ["workspace", "project", sa.text("priority DESC"), "enqueued_position"],
        sqlite_where=sa.text(where),
    )


def upgrade() -> None:
    op.add_column("work_items", sa.Column("held_by", sa.String(128), nullable=True))
    # Who holds each queued item's issue: its unreleased lease's session (one per issue).
    op.execute(
        "UPDATE work_items SET held_by = (SELECT leases.session_id FROM leases"
        " WHERE leases.workspace = work_items.workspace AND leases.issue = work_items.issue"
        " AND leases.released_us IS NULL)"
        f" WHERE {_QUEUED_ON_ISSUE}"
    )
    if op.get_bind().dialect.name == "postgresql":
        _pg_live_key(_LIVE_KEY)
        op.execute(
            f"CREATE INDEX ix_work_items_queued_on_issue ON work_items (({_ON_ISSUE_KEY}))"
            f" WHERE ({_ON_ISSUE_KEY}) IS NOT NULL"
        )
    else:
        _sqlite_ready(f"{_READY} AND held_by IS NULL")
        op.create_index(
            "ix_work_items_held",
            "work_items",
            ["workspace", "project", "held_by", sa.text("priority DESC"), "enqueued_position"],
            sqlite_where=sa.text(f"{_READY} AND held_by IS NOT NULL"),
        )
        op.create_index(
            "ix_work_items_queued_on_issue",
            "work_items",
            ["workspace", "issue"],
            sqlite_where=sa.text(_QUEUED_ON_ISSUE),
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_work_items_queued_on_issue")
        _pg_live_key(_LIVE_KEY_BEFORE)
        op.drop_column("work_items", "held_by")
    else:
        op.drop_index("ix_work_items_queued_on_issue", table_name="work_items")
        op.drop_index("ix_work_items_held", table_name="work_items")
        _sqlite_ready(_READY)
        # SQLite 3.35+ drops it in place (a batch copy of the table would lose DESC in its indexes)
        op.execute("ALTER TABLE work_items DROP COLUMN held_by")
