"""A pull walks the project's queued items in pull order instead of sorting them all.

``claim_next_work`` reads a page of the project's queued items ordered by ``priority DESC,
enqueued_position`` (``_FIRST_PAGE`` and ``_NEXT_PAGE`` in handlers/queue.py). On SQLite
``ix_work_items_queue`` had the priority ascending, so the order could not be read from it
in one direction: SQLite searched the project's queued items and sorted every one of them
on every pull (``USE TEMP B-TREE FOR RIGHT PART OF ORDER BY``): 183 µs a pull with 300
queued items, the pull's cost growing with the queue. The index now holds the priority
descending, as PostgreSQL's ``ix_work_items_live_key`` does. PostgreSQL's pulls use that
one; its ``ix_work_items_queue`` changes too, so both databases hold the index the tables
declare (a rebuild on SQLite builds it from that declaration).

Revision ID: 0014_queue_pull_order
Revises: 0013_declaring_key
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_queue_pull_order"
down_revision: str | Sequence[str] | None = "0013_declaring_key"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _index(priority: str) -> None:
    op.drop_index("ix_work_items_queue", table_name="work_items")
    op.create_index(
        "ix_work_items_queue",
        "work_items",
        ["workspace", "project", "status", sa.text(priority), "enqueued_position"],
    )


def upgrade() -> None:
    _index("priority DESC")


def downgrade() -> None:
    _index("priority")
