"""PostgreSQL: an issue's live declarers have one index, whatever the statistics.

Every claim_issue asks whether any live session declared working on the issue, and reads
those sessions when one did (``_DECLARERS`` and ``_CLAIM_READS`` in handlers/issues.py):
``workspace = … AND working_on = … AND ended_us IS NULL AND last_seen_us > …``. In the
generic plan asyncpg keeps from when ``sessions`` was empty, PostgreSQL read that through
``ix_sessions_workspace_seen`` (every live session of the workspace, filtered) or
``ix_sessions_registered`` (every session the workspace ever had), not
``ix_sessions_working_on``: all three lead with the workspace.

Now PostgreSQL compares the session's *declaring key*, ``workspace || chr(1) ||
working_on`` while it has not ended (NULL once ended or when it declares nothing), with one
value, and names neither the workspace nor ``working_on``: ``ix_sessions_declaring_key``,
on exactly that expression and ``last_seen_us`` (partial: key IS NOT NULL, which the
equality implies, so it holds only the sessions that declare), is the only index it can
use. SQLite picks ``ix_sessions_working_on`` without it (its statements are unchanged).

Revision ID: 0013_declaring_key
Revises: 0012_queue_live_key
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013_declaring_key"
down_revision: str | Sequence[str] | None = "0012_queue_live_key"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEY = "CASE WHEN ended_us IS NULL THEN workspace || E'\\x01' || working_on END"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"CREATE INDEX ix_sessions_declaring_key ON sessions (({_KEY}), last_seen_us) WHERE ({_KEY}) IS NOT NULL"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_sessions_declaring_key")
