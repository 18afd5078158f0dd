"""What one MCP client's connection remembers: the eventcoord sessions it registered.

After ``register_agent`` the session is *current* (later tools may omit ``session_id``), a
background task sends ``heartbeat_agent`` every ``ttl_seconds / 3``, and when the client
disconnects every session still remembered gets ``end_agent``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from eventcoord.client import AsyncClient, Unreachable

logger = logging.getLogger("eventcoord.mcp")
#: How long a disconnect may spend ending sessions (stdio clients kill the server after ~2 s).
END_TIMEOUT = 1.5


class Remembered:
    """The sessions of one MCP connection, each kept alive by its own heartbeat task."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._beats: dict[str, asyncio.Task[None]] = {}
        self.current: str | None = None

    def remember(self, session_id: str, ttl_seconds: int) -> None:
        """Make ``session_id`` current and start heartbeating it."""
        self.current = session_id
        if session_id not in self._beats:
            self._beats[session_id] = asyncio.create_task(
                self._heartbeat(session_id, ttl_seconds), name=f"heartbeat {session_id}"
            )

    def forget(self, session_id: str) -> None:
        """Stop heartbeating ``session_id`` (it ended); nothing is sent."""
        task = self._beats.pop(session_id, None)
        if task is not None:
            task.cancel()
        if self.current == session_id:
            self.current = None

    @property
    def sessions(self) -> list[str]:
        """The sessions remembered, oldest first."""
        return list(self._beats)

    async def close(self) -> None:
        """The client disconnected: stop the heartbeats and end every remembered session."""
        ending = list(self._beats)
        for sid in ending:
            self.forget(sid)
        if not ending:
            return

        async def end(sid: str) -> None:
            try:
                reply = await self.client.send({"type": "end_agent", "session_id": sid})
            except Unreachable as e:
                logger.warning("could not end session %s on disconnect: %s", sid, e)
                return
            refused = reply.refusal()
            if refused is not None and refused.code != "SESSION_NOT_LIVE":
                logger.warning("end_agent %s on disconnect refused: %s", sid, refused.code)

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(end(sid) for sid in ending)), END_TIMEOUT)

    async def _heartbeat(self, session_id: str, ttl_seconds: int) -> None:
        interval = max(ttl_seconds / 3, 0.1)
        while True:
            await asyncio.sleep(interval)
            try:
                reply = await self.client.send({"type": "heartbeat_agent", "session_id": session_id})
                refused = reply.refusal()
            except Unreachable as e:  # the loop boundary: log, and try again next beat
                logger.warning("heartbeat of %s failed: %s", session_id, e)
                continue
            if refused is None:
                continue
            if refused.code in ("SESSION_NOT_LIVE", "NOT_FOUND"):
                logger.info("session %s ended elsewhere (%s); no more heartbeats", session_id, refused.code)
                self._beats.pop(session_id, None)
                if self.current == session_id:
                    self.current = None
                return
            logger.warning("heartbeat of %s refused: %s", session_id, refused.code)
