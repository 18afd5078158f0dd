"""The Litestar app factory: routes, error mapping, and the lifespan that owns connections."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from litestar import Litestar
from litestar.openapi import OpenAPIConfig
from sqlalchemy import Connection, update

from eventcoord.api import commands, reads
from eventcoord.api.deps import Runtime
from eventcoord.api.errors import EXCEPTION_HANDLERS
from eventcoord.auth import Authenticator, ensure_workspace
from eventcoord.config import Settings
from eventcoord.service import Service
from eventcoord.store import log, open_store
from eventcoord.store.schema import settings as settings_table
from eventcoord.ui import routes as ui_routes

MAX_BODY = 1024 * 1024
logger = logging.getLogger("eventcoord")


def _extra_routes() -> list[Any]:
    """Routes of the later tiers, collected from their modules' ROUTES lists."""
    routes: list[Any] = []
    from eventcoord.api import files_routes, issue_routes, queue_routes, stream_routes

    for module in (issue_routes, files_routes, queue_routes, stream_routes):
        routes.extend(getattr(module, "ROUTES", []))
    return routes


def create_app(settings: Settings) -> Litestar:
    """Build the app for ``settings``; connections open in the lifespan."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        store = open_store(settings.database_url)
        await store.start()
        await store.migrate()

        def prepare(conn: Connection) -> None:
            now_us, _ = log.clock(conn)
            ensure_workspace(conn, "default", now_us)
            if settings.ttl_seconds is not None:
                conn.execute(
                    update(settings_table).where(settings_table.c.key == "ttl_seconds").values(value=str(settings.ttl_seconds))
                )
            log.forget_ttl()

        await store.transact(prepare)
        rt = Runtime(store=store, service=Service(store), auth=Authenticator(store, settings.bootstrap_token))
        app.state.runtime = rt
        from eventcoord.api.streaming_setup import start_streaming, stop_streaming

        await start_streaming(rt, settings)
        try:
            yield
        finally:
            await stop_streaming(rt)
            await store.close()

    return Litestar(
        route_handlers=[commands.post_command, *reads.ROUTES, *_extra_routes(), *ui_routes.ROUTES],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=[lifespan],
        request_max_body_size=MAX_BODY,
        openapi_config=OpenAPIConfig(title="eventcoord", version="0.1.0", path="/schema"),
        debug=False,
    )
