"""PostgreSQL: the queue's lookups of live items have one index, whatever the statistics.

Every queue command (enqueue_work, claim_next_work, start/finish_work) first looks for the
project's claimed or running items whose worker went stale (``_SUSPECTS`` in
handlers/queue.py): ``workspace = … AND project = … AND (status = … OR status = …)``. On
tables filled fast and not yet ANALYZEd (docs/decisions/0006-one-index-per-lookup.md), asyncpg's cached generic plan
read it through ``ix_work_items_status_order`` by ``workspace`` alone and filtered every
item the workspace ever had (bench/history.py --tiers, history store: 2,020 rows removed,
111 buffers, 0.8 ms per command); after ANALYZE the generic plan drove from ``sessions`` and
read each stale session's every item through ``ix_work_items_session``. Every index of
``work_items`` but the primary key leads with the workspace or the session, so any of them
could serve it.

Now those statements compare the item's *live key*, ``workspace || chr(1) || project ||
chr(1) || 'queued'`` while it is queued, ``… || 'active'`` while claimed or running, NULL once
finished, with one value (an equality: a probe of a list of keys cost more than a sequential
scan of a small table, and a generic plan made then kept it), and name neither the
workspace, the project nor the status: ``ix_work_items_live_key``, on exactly that
expression (partial: key IS NOT NULL, which the equality implies), is the only index they
can use. Its next columns are the pull order
(``priority DESC, enqueued_position``), so a page of queued items (``_FIRST_PAGE``,
``_NEXT_PAGE``) is a walk of the project's queued items in order, never a sort, and never a
finished item. SQLite picks these right without it (its statements are unchanged).

Revision ID: 0012_queue_live_key
Revises: 0011_one_index_each
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012_queue_live_key"
down_revision: str | Sequence[str] | None = "0011_one_index_each"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LIVE_KEY = (
    "CASE WHEN status = 'queued' THEN workspace || E'\\x01' || project || E'\\x01queued'"
    " WHEN status IN ('claimed', 'running') THEN workspace || E'\\x01' || project || E'\\x01active' END"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"CREATE INDEX ix_work_items_live_key ON work_items (({_LIVE_KEY}), priority DESC, enqueued_position)"
            f" WHERE ({_LIVE_KEY}) IS NOT NULL"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_work_items_live_key")
