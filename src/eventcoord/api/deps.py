"""Request-scoped helpers shared by the controllers: the caller and the app's services."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response

from eventcoord.api.ratelimit import vouch
from eventcoord.bootstrap import Runtime
from eventcoord.codec import encode
from eventcoord.context import Caller


def runtime(request: Request[Any, Any, Any]) -> Runtime:
    """The app's runtime (store, outbox, service, authenticator), built by :mod:`eventcoord.bootstrap`."""
    rt: Runtime = request.app.state.runtime
    return rt


async def caller(request: Request[Any, Any, Any]) -> Caller:
    """Authenticate the request's bearer token (every role may read its own workspace)."""
    who = await runtime(request).auth.authenticate(request.headers.get("authorization"))
    vouch(request.scope)
    return who


def json(value: Any, status: int = 200) -> Response[bytes]:
    """A JSON response from any msgspec-encodable value."""
    return Response(encode(value), status_code=status, media_type=MediaType.JSON)
