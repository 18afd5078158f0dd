"""Snapshots name the snapshot they extend: history rows are stored once, not in every manifest.

* ``snapshots.base_position``: the snapshot whose history this one extends (NULL: none; its
  history is all there is).
* ``snapshots.history``: JSON ``{table/history: {workspace: [chunk hash, ...]}}`` of the
  history rows that became final after the base (NULL: a snapshot written before this
  revision, whose manifest names all of its history).

Before, every snapshot's manifest named every history chunk ever stored, so the manifests
together grew with the square of the log.

Revision ID: 0008_snapshot_chain
Revises: 0007_perf
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_snapshot_chain"
down_revision: str | Sequence[str] | None = "0007_perf"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("snapshots", schema=None) as batch_op:
        batch_op.add_column(sa.Column("base_position", sa.BigInteger().with_variant(sa.Integer(), "sqlite")))
        batch_op.add_column(sa.Column("history", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("snapshots", schema=None) as batch_op:
        batch_op.drop_column("history")
        batch_op.drop_column("base_position")
