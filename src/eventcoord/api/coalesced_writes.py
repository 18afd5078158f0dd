"""One socket write per response: uvicorn's HTTP protocol with its writes gathered.

uvicorn writes a response's status line and headers when the application sends
``http.response.start`` and its body when it sends ``http.response.body``: two ``send``
system calls, and on loopback two TCP segments the peer wakes for. A command's answer is
both messages in one step of the event loop, so :class:`CoalescingHttpToolsProtocol` hands
uvicorn a transport that keeps what is written during a step and writes it once, at the
end of the step (``loop.call_soon``). Nothing is reordered and nothing waits for another
step: a streamed response (Server-Sent Events) still goes out as each event is sent.
"""

from __future__ import annotations

import asyncio
from typing import Any

from eventcoord.api.read_deadlines import DeadlineHttpToolsProtocol


class _GatheringTransport:
    """A transport whose writes during one step of the event loop go out as one write."""

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(bytes(data))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        self._flush()  # what was written goes before the close
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(p) for p in self._pending)

    def __getattr__(self, name: str) -> Any:  # everything else is the transport's own
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(DeadlineHttpToolsProtocol):
    """uvicorn's httptools protocol, writing each step's output once (module docstring).

    It keeps the deadlines on reading a request (``api/read_deadlines.py``).
    """

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # (uvloop's transports are not asyncio.Transport subclasses: no isinstance check)
        super().connection_made(_GatheringTransport(transport, self.loop))  # type: ignore[arg-type]
