"""A pull reads only the items it may take: queued ones that wait on no blocker.

An item is blocked until every item in its ``blocked_by`` finished ``done``. A pull used to
read every queued item of its project in pull order, and the blockers' statuses of each, to
skip the blocked ones: with 2,000 blocked items ahead a pull took 30 ms on SQLite and 74 ms
on PostgreSQL, the project's guard held all along (bench/history.py --tiers, ``claim_next_work
(behind blocked)``). The read model now keeps, per item, how many blockers it waits on:

* ``work_items.waiting_on``: its blockers not finished ``done`` (a ``done`` is final);
* ``work_blockers`` (workspace, blocker_id, item_id): for each item, its blockers that had
  not finished when it was enqueued: when one finishes ``done``, the items it blocks count
  down (projections/queue.py);
* the indexes a pull reads hold ready items only (``status = 'queued' AND waiting_on = 0``):
  PostgreSQL's live key (``ix_work_items_live_key``, 0012) and queued issue key
  (``ix_work_items_queued_issue_key``, 0015) are NULL for an item that waits; SQLite's
  ``ix_work_items_queued_issue`` (0015) is partial on ready items, and the new
  ``ix_work_items_ready`` serves the pages.

The counts and rows are filled in here as a replay of the log would leave them.

Revision ID: 0016_queue_ready
Revises: 0015_queue_at_cap
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_queue_ready"
down_revision: str | Sequence[str] | None = "0015_queue_at_cap"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FINISHED = ("done", "failed", "oom_killed", "cancelled")
_READY = "status = 'queued' AND waiting_on = 0"


def _live_key(queued: str) -> str:
    return (
        f"CASE WHEN {queued} THEN workspace || E'\\x01' || project || E'\\x01queued'"
        " WHEN status IN ('claimed', 'running') THEN workspace || E'\\x01' || project || E'\\x01active' END"
    )


def _queued_issue_key(queued: str) -> str:
    return f"CASE WHEN {queued} THEN workspace || E'\\x01' || project || E'\\x01' || coalesce(issue, '') END"


def _pg_indexes(queued: str) -> None:
    op.execute("DROP INDEX ix_work_items_live_key")
    op.execute("DROP INDEX ix_work_items_queued_issue_key")
    live, issue = _live_key(queued), _queued_issue_key(queued)
    op.execute(
        f"CREATE INDEX ix_work_items_live_key ON work_items (({live}), priority DESC, enqueued_position)"
        f" WHERE ({live}) IS NOT NULL"
    )
    op.execute(
        f"CREATE INDEX ix_work_items_queued_issue_key ON work_items (({issue}), priority DESC, enqueued_position)"
        f" WHERE ({issue}) IS NOT NULL"
    )


def _sqlite_queued_issue(where: str) -> None:
    op.drop_index("ix_work_items_queued_issue", table_name="work_items")
    op.create_index(
        "ix_work_items_queued_issue",
        "work_items",
        ["workspace", "project", "issue", sa.text("priority DESC"), "enqueued_position"],
        sqlite_where=sa.text(where),
    )


def _fill() -> None:
    """The counts and blocker rows a replay of the log leaves, for the items that name blockers.

    Whatever an item's status, it waits on its blockers not finished ``done`` (``done`` is
    final, and a replay counts down an item's wait whatever became of it), and each of its
    blockers not finished yet has its row.
    """
    conn = op.get_bind()
    blocked = conn.execute(sa.text("SELECT workspace, item_id, blocked_by FROM work_items WHERE blocked_by <> '[]'"))
    for workspace, item_id, blocked_by in blocked.all():
        blockers = list(dict.fromkeys(json.loads(blocked_by)))
        known = dict(
            conn.execute(
                sa.text("SELECT item_id, status FROM work_items WHERE workspace = :ws AND item_id IN :ids").bindparams(
                    sa.bindparam("ids", expanding=True)
                ),
                {"ws": workspace, "ids": blockers},
            ).all()
        )
        waiting = sum(b in known and known[b] != "done" for b in blockers)
        if waiting:
            conn.execute(
                sa.text("UPDATE work_items SET waiting_on = :n WHERE item_id = :item"), {"n": waiting, "item": item_id}
            )
        for blocker in blockers:
            if blocker in known and known[blocker] not in _FINISHED:
                conn.execute(
                    sa.text("INSERT INTO work_blockers (workspace, blocker_id, item_id) VALUES (:ws, :b, :item)"),
                    {"ws": workspace, "b": blocker, "item": item_id},
                )


def upgrade() -> None:
    op.add_column("work_items", sa.Column("waiting_on", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "work_blockers",
        sa.Column("workspace", sa.String(64), primary_key=True),
        sa.Column("blocker_id", sa.String(128), primary_key=True),
        sa.Column("item_id", sa.String(128), primary_key=True),
    )
    _fill()
    if op.get_bind().dialect.name == "postgresql":
        _pg_indexes("status = 'queued' AND waiting_on = 0")
    else:
        _sqlite_queued_issue(_READY)
        op.create_index(
            "ix_work_items_ready",
            "work_items",
            ["workspace", "project", sa.text("priority DESC"), "enqueued_position"],
            sqlite_where=sa.text(_READY),
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _pg_indexes("status = 'queued'")
    else:
        op.drop_index("ix_work_items_ready", table_name="work_items")
        _sqlite_queued_issue("status = 'queued'")
    op.drop_table("work_blockers")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_column("work_items", "waiting_on")
    else:  # SQLite 3.35+ drops it in place (a batch copy of the table would lose DESC in its indexes)
        op.execute("ALTER TABLE work_items DROP COLUMN waiting_on")
