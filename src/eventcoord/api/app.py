"""The Litestar app factory: the routes, the error mapping, and a lifespan that owns the runtime."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from litestar import Litestar
from litestar.openapi import OpenAPIConfig

from eventcoord import bootstrap
from eventcoord.api import openapi, params
from eventcoord.api.body import MAX_BODY
from eventcoord.api.errors import EXCEPTION_HANDLERS
from eventcoord.api.ratelimit import Limit, RateLimits, middleware
from eventcoord.api.routes import ROUTES
from eventcoord.config import Settings


def create_app(settings: Settings) -> Litestar:
    """Build the app for ``settings``; the runtime (store, outbox, service) starts in the lifespan."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        rt = await bootstrap.start(settings)
        app.state.runtime = rt
        try:
            yield
        finally:
            await rt.stop()

    limits = RateLimits(
        token=Limit(settings.rate_token_per_second, settings.rate_token_burst),
        address=Limit(settings.rate_address_per_second, settings.rate_address_burst),
        auth_failures=Limit(settings.rate_auth_failures_per_second, settings.rate_auth_failures_burst),
    )
    # POST /v1/commands answers with a bare ASGI app (``answers.CommandAnswer``), which
    # Litestar sends as is: response headers, cookies, cache control, ETags or after_request
    # hooks configured here would not reach a command's answer (none are).
    app = Litestar(
        route_handlers=ROUTES,
        middleware=[middleware(limits)] if limits.on else [],
        exception_handlers=EXCEPTION_HANDLERS,
        before_request=params.before_request,
        lifespan=[lifespan],
        request_max_body_size=MAX_BODY,
        openapi_config=OpenAPIConfig(title="eventcoord", version="0.1.0", path="/schema"),
        debug=False,
    )
    openapi.install(app)
    return app
