"""Index work_items by enqueue position (the PostgreSQL group commit renumbers by it).

A PostgreSQL batch moves every provisional position it wrote into a read model to the
real one just before it commits, with one ranged UPDATE per position column; every such
column must be the leading column of an index so that UPDATE never scans the table.
``work_items.enqueued_position`` was the only one that was not.

Revision ID: 0003_pg_group_commit
Revises: 0002_dashboard
Create Date: 2026-12-01 05:00:00

"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003_pg_group_commit"
down_revision: str | Sequence[str] | None = "0002_dashboard"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.create_index("ix_work_items_enqueued", ["enqueued_position"], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.drop_index("ix_work_items_enqueued")
