"""Starting and stopping the broker and the relay with the app (wired by the streaming tier)."""

from __future__ import annotations

from eventcoord.api.deps import Runtime
from eventcoord.config import Settings


async def start_streaming(rt: Runtime, settings: Settings) -> None:
    """Start the embedded broker and the outbox relay as configured (``--nats``)."""


async def stop_streaming(rt: Runtime) -> None:
    """Stop what :func:`start_streaming` started."""
