"""The harness sessions: which eventcoord session a coding-agent harness's session is bound to.

A harness (Claude Code, Codex) names its sessions with ids of its own; ``POST
/v1/hooks/{harness}`` binds each (workspace, harness, id) to one eventcoord session. The
row is keyed by a digest of the id (``thread``: the raw id is never stored, as in actor
keys), and keeps the bound session and its generation (a new session is registered once
the bound one ended or went stale), the position up to which its messages and displaced
holds were delivered, and the last assistant message of its last ``Stop`` (the handoff
note its end carries). Bookkeeping of the hook route, like the idempotency records: it is
not a read model and is not rebuilt from events.

Revision ID: 0019_harness_sessions
Revises: 0018_stale_workers
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_harness_sessions"
down_revision: str | Sequence[str] | None = "0018_stale_workers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "harness_sessions",
        sa.Column("workspace", sa.String(64), primary_key=True),
        sa.Column("harness", sa.String(16), primary_key=True),
        sa.Column("thread", sa.String(64), primary_key=True),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("previous_session_id", sa.String(128), nullable=True),
        sa.Column("delivered_position", _BIG, nullable=False),
        sa.Column("last_message", sa.Text, nullable=True),
        sa.Column("updated_us", _BIG, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("harness_sessions")
