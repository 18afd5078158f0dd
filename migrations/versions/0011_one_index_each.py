"""Each hot lookup of a live row has exactly one index it can use: no plan can drift.

On PostgreSQL, tables filled fast and not yet ANALYZEd made the planner pick a wrong index
for the commands' lookups (docs/decisions/0006-one-index-per-lookup.md): without statistics ``released_us IS NULL`` is
taken to match 0.5 % of the rows, so every partial index of unreleased rows looks tiny,
and a full scan of one, or a scan of it by ``workspace`` alone, costs the same as the
probe of the right one. asyncpg's prepared statements then keep that generic plan,
planned while the table was small, until something invalidates it:

* ``leases`` by issue (release_issue, claim_issue, the release's read model) scanned
  ``ix_leases_project_live`` by workspace: every live lease of the workspace. Now
  ``ix_leases_project_live`` and ``ix_leases_session_live`` also say that their key is not
  null (always true: both columns are NOT NULL), so only statements that name the project,
  or the session, imply their predicate; a lookup by issue has ``uq_leases_unreleased`` only.
  Both backends (SQLite uses a partial index when a comparison on ``z`` meets
  ``z IS NOT NULL``, as PostgreSQL does).
* PostgreSQL only: claim_files' overlap probes full-scanned ``ix_file_claims_issue_live``
  (any partial index of unreleased claims matches ``released_us IS NULL``), and an issue's
  unreleased claims (release_files, its read model) were read by walking
  ``ix_file_claims_live_order``. Both now compare one *live key* expression that is NULL for
  released claims, ``CASE WHEN released_us IS NULL THEN workspace || chr(1) || … END``,
  and do not say ``released_us IS NULL``: the new indexes on exactly these expressions
  (partial: key IS NOT NULL, which the comparison implies) are the only ones they can use.
  ``ix_file_claims_live_c`` served the probes only and is replaced.

Revision ID: 0011_one_index_each
Revises: 0010_agents_order
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_one_index_each"
down_revision: str | Sequence[str] | None = "0010_agents_order"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PREFIX_KEY = "CASE WHEN released_us IS NULL THEN workspace || E'\\x01' || literal_prefix END"
_ISSUE_KEY = "CASE WHEN released_us IS NULL THEN workspace || E'\\x01' || issue END"


def _lease_indexes(where: dict[str, str]) -> None:
    for name, column in (
        ("ix_leases_project_live", ["workspace", "project"]),
        ("ix_leases_session_live", ["session_id"]),
    ):
        op.drop_index(name, table_name="leases")
        predicate = sa.text(where[name])
        op.create_index(name, "leases", column, sqlite_where=predicate, postgresql_where=predicate)


def upgrade() -> None:
    _lease_indexes(
        {
            "ix_leases_project_live": "released_us IS NULL AND project IS NOT NULL",
            "ix_leases_session_live": "released_us IS NULL AND session_id IS NOT NULL",
        }
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_file_claims_live_c")
        op.execute(
            f'CREATE INDEX ix_file_claims_live_key ON file_claims ((({_PREFIX_KEY}) COLLATE "C"))'
            f" WHERE ({_PREFIX_KEY}) IS NOT NULL"
        )
        op.execute(
            f"CREATE INDEX ix_file_claims_issue_live_key ON file_claims (({_ISSUE_KEY}))"
            f" WHERE ({_ISSUE_KEY}) IS NOT NULL"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_file_claims_issue_live_key")
        op.execute("DROP INDEX ix_file_claims_live_key")
        op.execute(
            "CREATE INDEX ix_file_claims_live_c ON file_claims"
            " (((workspace || E'\\x01' || literal_prefix) COLLATE \"C\")) WHERE released_us IS NULL"
        )
    _lease_indexes({"ix_leases_project_live": "released_us IS NULL", "ix_leases_session_live": "released_us IS NULL"})
