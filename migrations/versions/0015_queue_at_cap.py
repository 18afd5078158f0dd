"""A pull from a project at its WIP cap reads only the items it could take.

At the cap no item on a free issue can be granted, so a pull may take only an item without
an issue, one on an issue whose lease it holds, or one whose lease its own recovery freed
(domain/queue/selection.py). It used to read every queued item of the project and, for
each on an issue, six statements (the issue, its lease and declarers, the cap): a pull at
the cap over 300 such items sent ~1,800 statements with the project's guard held
(tests/contract/test_queue_at_cap.py). Once it has met the cap it now reads just those:
the project's queued items without an issue, in pull order, and the ones on given issues,
through an index of queued items by project and issue:

* PostgreSQL: ``ix_work_items_queued_issue_key`` on the item's *queued issue key*,
  ``workspace || chr(1) || project || chr(1) || coalesce(issue, '')`` while it is queued
  (NULL otherwise), then the pull order — the only index on that expression, as the live
  keys of 0012 are;
* SQLite: ``ix_work_items_queued_issue`` (workspace, project, issue, pull order), partial on
  queued items, named by the statements (``INDEXED BY``).

Revision ID: 0015_queue_at_cap
Revises: 0014_queue_pull_order
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_queue_at_cap"
down_revision: str | Sequence[str] | None = "0014_queue_pull_order"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEY = "CASE WHEN status = 'queued' THEN workspace || E'\\x01' || project || E'\\x01' || coalesce(issue, '') END"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"CREATE INDEX ix_work_items_queued_issue_key ON work_items (({_KEY}), priority DESC, enqueued_position)"
            f" WHERE ({_KEY}) IS NOT NULL"
        )
    else:
        op.create_index(
            "ix_work_items_queued_issue",
            "work_items",
            ["workspace", "project", "issue", sa.text("priority DESC"), "enqueued_position"],
            sqlite_where=sa.text("status = 'queued'"),
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_work_items_queued_issue_key")
    else:
        op.drop_index("ix_work_items_queued_issue", table_name="work_items")
