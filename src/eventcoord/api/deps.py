"""Request-scoped helpers shared by the controllers: the caller and the app's services."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litestar import Request

from eventcoord.auth import Authenticator
from eventcoord.context import Caller
from eventcoord.errors import DomainError
from eventcoord.service import Service
from eventcoord.store.base import EventStore


@dataclass
class Runtime:
    """What the lifespan builds and the controllers use."""

    store: EventStore
    service: Service
    auth: Authenticator
    extras: dict[str, Any] = field(default_factory=dict)


def runtime(request: Request[Any, Any, Any]) -> Runtime:
    """The app's runtime (store, service, authenticator)."""
    rt: Runtime = request.app.state.runtime
    return rt


async def caller(request: Request[Any, Any, Any], *, write: bool = False) -> Caller:
    """Authenticate the request's bearer token."""
    return await runtime(request).auth.authenticate(request.headers.get("authorization"))


def require_reader(c: Caller) -> Caller:
    """Every role may read its own workspace."""
    if c.role not in ("admin", "human", "agent", "reader"):
        raise DomainError("FORBIDDEN", "unknown role")
    return c
