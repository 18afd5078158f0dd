"""Flat with history and load: indexes of live claims only, and a count of unreleased leases.

* ``ix_file_claims_issue_live``: an issue's unreleased claims (release_files and its read
  model read them without walking the issue's released history).
* ``ix_file_claims_live_c`` (PostgreSQL): claim_files' overlap probes are ranges on
  ``(workspace || chr(1) || literal_prefix) COLLATE "C"``, an expression only this partial
  index of unreleased claims serves (the LIKE terms before could use no index).
* ``project_leases``: unreleased leases per project, kept by the lease appliers in the
  same transaction; the WIP cap reads it instead of counting every unreleased lease.

Revision ID: 0007_perf
Revises: 0006_waiting
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_perf"
down_revision: str | Sequence[str] | None = "0006_waiting"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("file_claims", schema=None) as batch_op:
        batch_op.create_index(
            "ix_file_claims_issue_live",
            ["workspace", "issue"],
            unique=False,
            sqlite_where=sa.text("released_us IS NULL"),
            postgresql_where=sa.text("released_us IS NULL"),
        )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE INDEX ix_file_claims_live_c ON file_claims"
            " (((workspace || E'\\x01' || literal_prefix) COLLATE \"C\")) WHERE released_us IS NULL"
        )
    op.create_table(
        "project_leases",
        sa.Column("workspace", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=128), nullable=False),
        sa.Column("unreleased", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("workspace", "project"),
    )
    op.execute(
        "INSERT INTO project_leases (workspace, project, unreleased)"
        " SELECT workspace, project, count(*) FROM leases WHERE released_us IS NULL GROUP BY workspace, project"
    )


def downgrade() -> None:
    op.drop_table("project_leases")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_file_claims_live_c")
    with op.batch_alter_table("file_claims", schema=None) as batch_op:
        batch_op.drop_index("ix_file_claims_issue_live")
