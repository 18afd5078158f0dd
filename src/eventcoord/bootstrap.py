"""One place that wires the service together: store, outbox, service, authenticator, hooks, chainer.

:func:`start` opens and migrates the store, prepares it (the ``default`` workspace, the
TTL given on the command line), starts the outbox and builds the command pipeline with
its commit hook; :meth:`Runtime.stop` undoes it in reverse. The HTTP app's lifespan is
its only caller in production; tests and tools may call it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, update

from eventcoord.auth import Authenticator, ensure_workspace
from eventcoord.config import Settings
from eventcoord.harness.hooks import Hooks
from eventcoord.history.asof import History
from eventcoord.history.chain_process import ChainProcess
from eventcoord.history.snapshot_process import SnapshotProcess
from eventcoord.outbox.setup import Outbox, start_outbox
from eventcoord.revocations import Revocations
from eventcoord.service import Service
from eventcoord.store import dbclock, open_store
from eventcoord.store.base import EventStore
from eventcoord.store.schema import settings as settings_table


@dataclass(frozen=True, slots=True)
class Runtime:
    """Everything a running service holds, typed: what the routes use."""

    settings: Settings
    store: EventStore
    outbox: Outbox
    service: Service
    auth: Authenticator
    history: History
    snapshots: SnapshotProcess
    hooks: Hooks
    revocations: Revocations
    chainer: ChainProcess

    async def stop(self) -> None:
        """Stop the chainer's and the snapshot worker's processes, the outbox (relay, then broker), the store."""
        try:
            await self.revocations.stop()
            await self.chainer.stop()
            await self.snapshots.stop()
            await self.outbox.stop()
        finally:
            self.history.close()
            await self.store.close()


async def start(settings: Settings) -> Runtime:
    """Open, migrate and prepare the store; start the outbox; build the pipeline."""
    store = open_store(settings.database_url)
    await store.start()
    await store.migrate()

    def prepare(conn: Connection) -> None:
        now_us, _ = dbclock.read(conn)
        ensure_workspace(conn, "default", now_us)
        if settings.ttl_seconds is not None:
            conn.execute(
                update(settings_table)
                .where(settings_table.c.key == "ttl_seconds")
                .values(value=str(settings.ttl_seconds))
            )
        dbclock.forget_ttl(conn)

    try:
        await store.transact(prepare)
        outbox = await start_outbox(store, settings)
        # In a process of its own: a snapshot's replay would hold this process's GIL.
        worker = SnapshotProcess(store, settings.database_url, settings.snapshot_every)
        worker.start()
        # In a process of its own too: hashing the log would take this process's GIL.
        chainer = ChainProcess(store, settings.database_url)
        chainer.start()
    except BaseException:
        await store.close()
        raise
    service = Service(store, on_commit=outbox.committed)
    return Runtime(
        settings=settings,
        store=store,
        outbox=outbox,
        service=service,
        auth=Authenticator(store, settings.bootstrap_token),
        history=History(store),
        snapshots=worker,
        hooks=Hooks(service, store),
        revocations=Revocations(store),
        chainer=chainer,
    )
