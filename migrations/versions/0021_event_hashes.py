"""The log's hash chain: a hash per event, kept beside the log (docs/protocol.md#the-hash-chain).

``event_hashes`` holds each event's link in the chain, filled in position order off the
command path by every server's chainer (``eventcoord.history.chainer``). This revision
creates it and chains every event already in the log.

Revision ID: 0021_event_hashes
Revises: 0020_harness_beats
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021_event_hashes"
down_revision: str | Sequence[str] | None = "0020_harness_beats"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "event_hashes",
        sa.Column(
            "position", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=False
        ),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    from eventcoord.history.chain import chain_all

    chain_all(op.get_bind())


def downgrade() -> None:
    op.drop_table("event_hashes")
