"""Tokens get a public id and a revocation; sessions remember the token that registered them.

``tokens.token_id`` is derived from the stored digest (``auth.token_id_of``), so the rows
that exist get theirs here; ``tokens.revoked_us`` marks a revoked token (kept, never
deleted, so ``eventcoord token list`` shows it). ``sessions.token_id`` is projected from
``AgentRegistered.token_id`` (docs/protocol.md#roles: a session belongs to the token that registered it).

Revision ID: 0005_hardening
Revises: 0004_history
Create Date: 2026-12-01 09:00:00

"""

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_hardening"
down_revision: str | Sequence[str] | None = "0004_history"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _token_id(token_hash: str) -> str:
    # The same derivation as eventcoord.auth.token_id_of (migrations do not import the app).
    return "tok_" + hashlib.sha256(b"eventcoord-token-id:" + token_hash.encode()).hexdigest()[:24]


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("token_id", sa.String(length=40), nullable=True))
        batch_op.add_column(
            sa.Column("revoked_us", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True)
        )
    conn = op.get_bind()
    tokens = sa.table("tokens", sa.column("token_hash", sa.String), sa.column("token_id", sa.String))
    for (digest,) in conn.execute(sa.select(tokens.c.token_hash)).all():
        conn.execute(sa.update(tokens).where(tokens.c.token_hash == digest).values(token_id=_token_id(digest)))
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.create_index("ix_tokens_token_id", ["token_id"], unique=True)
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("token_id", sa.String(length=40), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("token_id")
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_index("ix_tokens_token_id")
        batch_op.drop_column("revoked_us")
        batch_op.drop_column("token_id")
