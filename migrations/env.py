"""Alembic environment: runs on the connection eventcoord hands it (sync or via run_sync)."""

from __future__ import annotations

from alembic import context

import eventcoord.projections.tables  # noqa: F401  (registers the read-model tables)
from eventcoord.store.schema import metadata

connection = context.config.attributes.get("connection")


def run() -> None:
    """Run migrations on the provided connection, or on the configured URL (autogenerate)."""
    if connection is not None:
        context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    from sqlalchemy import create_engine

    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


run()
