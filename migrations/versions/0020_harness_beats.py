"""Harness sessions remember when one of their hooks last took the turn to send a heartbeat.

A hook whose session's last sign of life is a third of the TTL old sends a heartbeat; when
several such hooks arrive at once (on any replica), the one whose compare-and-set moves
``beat_claimed_us`` sends it and the others send nothing (``harness.bindings``), with no
idempotency record left behind per heartbeat.

Revision ID: 0020_harness_beats
Revises: 0019_harness_sessions
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_harness_beats"
down_revision: str | Sequence[str] | None = "0019_harness_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("harness_sessions") as batch_op:
        batch_op.add_column(sa.Column("beat_claimed_us", sa.BigInteger().with_variant(sa.Integer(), "sqlite")))


def downgrade() -> None:
    with op.batch_alter_table("harness_sessions") as batch_op:
        batch_op.drop_column("beat_claimed_us")
