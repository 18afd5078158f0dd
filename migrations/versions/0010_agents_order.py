"""GET /v1/agents walks the sessions newest first instead of sorting every session.

The list is the newest ``limit`` sessions of the workspace, ended ones included; with only
``ix_sessions_workspace_seen`` the database sorted every session ever registered there (they
grow with session churn) to return the first page.

Revision ID: 0010_agents_order
Revises: 0009_queue_order
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010_agents_order"
down_revision: str | Sequence[str] | None = "0009_queue_order"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_sessions_registered", "sessions", ["workspace", "registered_us", "session_id"])


def downgrade() -> None:
    op.drop_index("ix_sessions_registered", table_name="sessions")
