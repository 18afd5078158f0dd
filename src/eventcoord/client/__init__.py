"""The typed Python client of eventcoord (docs/protocol.md#clients), and live subscriptions.

    from eventcoord.client import Client
    with Client() as ec:                      # finds the server and token by itself
        me = ec.register_agent(actor="me")
        lease = ec.claim_issue(session_id=me.session_id, project="P", issue="P-1")

``AsyncClient`` has the same methods, awaited, and ``.stream()`` (Server-Sent Events);
``subscribe`` follows JetStream. A refusal raises ``Refused`` (a subclass per code family,
from ``eventcoord.errors``). Names load on first use: ``import eventcoord.client`` is fast.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the harness hook command imports this package, and no more
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from typing import Any

    from eventcoord.client.aio import AsyncClient
    from eventcoord.client.reply import Reply
    from eventcoord.client.sync import Client
    from eventcoord.codec import WireEvent
    from eventcoord.errors import (
        AccessDenied,
        Contended,
        InvalidRequest,
        NotCurrent,
        NotFound,
        Refused,
        Retryable,
        Unreachable,
    )

__all__ = [
    "AccessDenied",
    "AsyncClient",
    "Client",
    "Contended",
    "InvalidRequest",
    "NotCurrent",
    "NotFound",
    "Refused",
    "Reply",
    "Retryable",
    "Unreachable",
    "subscribe",
]

_HOME = {
    "Client": "eventcoord.client.sync",
    "AsyncClient": "eventcoord.client.aio",
    "Reply": "eventcoord.client.reply",
    **{
        name: "eventcoord.errors"
        for name in (
            "AccessDenied",
            "Contended",
            "InvalidRequest",
            "NotCurrent",
            "NotFound",
            "Refused",
            "Retryable",
            "Unreachable",
        )
    },
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def subscribe(
    nats_url: str,
    workspace: str = "*",
    types: Sequence[str] | None = None,
    after: int = 0,
    stream: str = "EVENTCOORD",
) -> AsyncIterator[WireEvent]:
    """Events with position > ``after`` from JetStream, in order, then live (see ``subscriber``)."""
    from eventcoord.client.subscriber import subscribe as from_jetstream

    async for event in from_jetstream(nats_url, workspace, types, after, stream):
        yield event
