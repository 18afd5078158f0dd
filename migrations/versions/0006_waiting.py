"""Waiting lines, lock delay and the per-agent limit (docs/protocol.md#waiting).

``waits``: one row per waiter (a files wait: one per path); ``position`` (the WaitStarted's)
leads the primary key, so the PostgreSQL group commit renumbers it by an index range.
``named_lease_slots``: the holders of each named lease (docs/protocol.md#capacity); ``named_leases``
gains its fixed ``capacity``. ``projects`` gains ``lock_delay_seconds`` and ``agent_wip_limit``; ``issues`` the last
involuntary end of a lease (``delay_from_us``, ``delay_session_id``).

Revision ID: 0006_waiting
Revises: 0005_hardening
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_waiting"
down_revision: str | Sequence[str] | None = "0005_hardening"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "waits",
        sa.Column("position", _BIG, nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("workspace", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("key", sa.String(length=1024), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("actor_key", sa.String(length=200), nullable=False),
        sa.Column("project", sa.String(length=128), nullable=True),
        sa.Column("issue", sa.String(length=128), nullable=True),
        sa.Column("paths", sa.Text(), nullable=False),
        sa.Column("exclusive", sa.Boolean(), nullable=False),
        sa.Column("ttl_seconds", sa.Integer(), nullable=True),
        sa.Column("capacity", sa.Integer(), nullable=True),
        sa.Column("since_us", _BIG, nullable=False),
        sa.PrimaryKeyConstraint("position", "idx"),
    )
    with op.batch_alter_table("waits", schema=None) as batch_op:
        batch_op.create_index("ix_waits_line", ["workspace", "kind", "key", "position"], unique=False)
        batch_op.create_index("ix_waits_session", ["session_id"], unique=False)
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lock_delay_seconds", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("agent_wip_limit", sa.Integer(), nullable=True))
    with op.batch_alter_table("issues", schema=None) as batch_op:
        batch_op.add_column(sa.Column("delay_from_us", _BIG, nullable=True))
        batch_op.add_column(sa.Column("delay_session_id", sa.String(length=128), nullable=True))
    with op.batch_alter_table("named_leases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("capacity", sa.Integer(), nullable=False, server_default="1"))
    op.create_table(
        "named_lease_slots",
        sa.Column("workspace", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("actor_key", sa.String(length=200), nullable=True),
        sa.Column("fencing_token", _BIG, nullable=False),
        sa.Column("ttl_seconds", sa.Integer(), nullable=False),
        sa.Column("expires_us", _BIG, nullable=False),
        sa.Column("acquired_us", _BIG, nullable=False),
        sa.PrimaryKeyConstraint("workspace", "name", "session_id"),
    )
    with op.batch_alter_table("named_lease_slots", schema=None) as batch_op:
        batch_op.create_index("ix_named_lease_slots_session", ["session_id"], unique=False)
    # The holders of existing leases become their slots.
    op.execute(
        "INSERT INTO named_lease_slots (workspace, name, session_id, actor_key, fencing_token, ttl_seconds, "
        "expires_us, acquired_us) "
        "SELECT workspace, name, session_id, actor_key, fencing_token, ttl_seconds, COALESCE(expires_us, 0), "
        "COALESCE(acquired_us, 0) "
        "FROM named_leases WHERE session_id IS NOT NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table("named_lease_slots", schema=None) as batch_op:
        batch_op.drop_index("ix_named_lease_slots_session")
    op.drop_table("named_lease_slots")
    with op.batch_alter_table("named_leases", schema=None) as batch_op:
        batch_op.drop_column("capacity")
    with op.batch_alter_table("issues", schema=None) as batch_op:
        batch_op.drop_column("delay_session_id")
        batch_op.drop_column("delay_from_us")
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_column("agent_wip_limit")
        batch_op.drop_column("lock_delay_seconds")
    with op.batch_alter_table("waits", schema=None) as batch_op:
        batch_op.drop_index("ix_waits_session")
        batch_op.drop_index("ix_waits_line")
    op.drop_table("waits")
