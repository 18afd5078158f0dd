"""A pull finds the stale workers of its project without walking the items in work.

Every queue command on a project first re-queues the work of its stale workers
(``domain/queue/recovery.py``). It found them by walking the project's every claimed and
running item and probing each one's session: with 3,000 items in work by live agents a
pull and a finish took 3.0 ms on SQLite against 0.5 ms with 10 (not flat with load). The
read model now keeps, on each session, how many items it works on:

* ``sessions.active_items``: the session's claimed and running items. The sessions
  projection keeps it from the queue's events (projections/sessions.py): a claim adds one,
  a finish or re-queue of an item in work takes one from its worker.
* ``session_work``: the items in work and their workers, kept by the same projection: a
  finish's event names who finished the item (an admin may finish another's), and the
  projection finds its worker here rather than in the queue's tables, so that it is
  rebuilt, checked and replayed on its own.
* ``ix_sessions_stale_workers``: the non-human sessions that work on something (a human's
  work is never recovered), by workspace and last sign of life, partial on
  ``active_items > 0 AND kind <> 'human'``. The stale ones are a range of it, read
  without passing the live ones; each one's items of the project are then probed through
  ``ix_work_items_session``. PostgreSQL's index is on the expression
  ``CASE WHEN active_items > 0 AND kind <> 'human' THEN workspace END`` (``PG_WORKER_KEY``),
  which no other index
  holds, so its planner has it alone to choose with or without statistics; SQLite's
  statements name theirs (``INDEXED BY``).

A session that ends re-queues its items (``end_agent``), so an ended session works on
nothing and the range of last signs of life finds every stale worker. The column is filled
in here as a replay of the log would leave it.

Revision ID: 0018_stale_workers
Revises: 0017_queue_held
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_stale_workers"
down_revision: str | Sequence[str] | None = "0017_queue_held"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_WORKING = "active_items > 0 AND kind <> 'human'"
_WORKER_KEY = f"CASE WHEN {_WORKING} THEN workspace END"


def upgrade() -> None:
    op.create_table(
        "session_work",
        sa.Column("item_id", sa.String(128), primary_key=True),
        sa.Column("workspace", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
    )
    op.execute(
        "INSERT INTO session_work (item_id, workspace, session_id) SELECT item_id, workspace, session_id"
        " FROM work_items WHERE status IN ('claimed', 'running') AND session_id IS NOT NULL"
    )
    op.add_column("sessions", sa.Column("active_items", sa.Integer, nullable=False, server_default="0"))
    op.execute(
        "UPDATE sessions SET active_items = (SELECT count(*) FROM work_items"
        " WHERE work_items.session_id = sessions.session_id AND work_items.status IN ('claimed', 'running'))"
        " WHERE session_id IN (SELECT session_id FROM work_items WHERE status IN ('claimed', 'running'))"
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"CREATE INDEX ix_sessions_stale_workers ON sessions (({_WORKER_KEY}), last_seen_us) WHERE {_WORKING}"
        )
    else:
        op.create_index(
            "ix_sessions_stale_workers",
            "sessions",
            ["workspace", "last_seen_us"],
            sqlite_where=sa.text(_WORKING),
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_sessions_stale_workers")
        op.drop_column("sessions", "active_items")
    else:
        op.drop_index("ix_sessions_stale_workers", table_name="sessions")
        op.execute("ALTER TABLE sessions DROP COLUMN active_items")
    op.drop_table("session_work")
