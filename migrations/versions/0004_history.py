"""History (docs/protocol.md#history): indexes for the log's filters, snapshots of the read models, archives.

* ``events``: (workspace, type, position) makes a page filtered by type a seek plus a walk
  in position order. Only this one: every index on ``events`` is paid by every command
  (streams use the unique (workspace, stream, version), times a search over positions).
* ``snapshots`` + ``snapshot_chunks``: the read models right after a position, as a
  manifest of content-addressed chunks (a chunk that did not change is shared).
* ``archives``: prefixes of the log moved to a file by ``eventcoord archive``. On
  PostgreSQL the immutability trigger lets exactly that DELETE through: only rows below
  the boundary the archiving transaction declared (``SET LOCAL eventcoord.archive_before``);
  UPDATE stays refused.

Revision ID: 0004_history
Revises: 0003_pg_group_commit
Create Date: 2026-12-01 08:30:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_history"
down_revision: str | Sequence[str] | None = "0003_pg_group_commit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

_IMMUTABLE_WITH_ARCHIVE = """
CREATE OR REPLACE FUNCTION eventcoord_events_immutable() RETURNS trigger AS $$
DECLARE
  boundary text := current_setting('eventcoord.archive_before', true);
BEGIN
  IF TG_OP = 'DELETE' AND boundary IS NOT NULL AND boundary <> ''
     AND OLD.position < boundary::bigint THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'events are immutable: % refused', TG_OP
    USING ERRCODE = 'restrict_violation';
END $$ LANGUAGE plpgsql
"""

_IMMUTABLE = """
CREATE OR REPLACE FUNCTION eventcoord_events_immutable() RETURNS trigger AS $$
BEGIN
  RAISE EXCEPTION 'events are immutable: % refused', TG_OP
    USING ERRCODE = 'restrict_violation';
END $$ LANGUAGE plpgsql
"""


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index("ix_events_workspace_type_position", ["workspace", "type", "position"], unique=False)
    op.create_table(
        "snapshots",
        sa.Column("position", BigInt, autoincrement=False, nullable=False),
        sa.Column("recorded_us", BigInt, nullable=False),
        sa.Column("created_us", BigInt, nullable=False),
        sa.Column("manifest", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("position"),
    )
    op.create_table(
        "snapshot_chunks",
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("hash"),
    )
    op.create_table(
        "archives",
        sa.Column("before_position", BigInt, autoincrement=False, nullable=False),
        sa.Column("file", sa.Text(), nullable=False),
        sa.Column("events", BigInt, nullable=False),
        sa.Column("archived_us", BigInt, nullable=False),
        sa.PrimaryKeyConstraint("before_position"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_IMMUTABLE_WITH_ARCHIVE)


def downgrade() -> None:
    """Downgrade schema."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_IMMUTABLE)
    op.drop_table("archives")
    op.drop_table("snapshot_chunks")
    op.drop_table("snapshots")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_workspace_type_position")
