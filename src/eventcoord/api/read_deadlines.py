"""Deadlines on reading a request: a client that sends its headers or its body too slowly is cut.

uvicorn times a connection out only between requests (keep-alive), never while it reads
one, so a client sending its headers a byte at a time (slowloris) held a connection and
its buffers for as long as it liked. Here a request's headers must arrive within
``header_timeout`` seconds of its first byte (of the connection, for the first one) and
its body within ``body_timeout`` seconds of its headers; past either the server answers
408 ``REQUEST_TIMEOUT`` (docs/protocol.md#errors) if it has not answered yet, and closes
the connection. A response may take as long as it needs (event streams never end).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from eventcoord import errors

#: Seconds from a request's first byte (a connection's opening, for its first) to its headers' end.
HEADER_TIMEOUT = 10.0
#: Seconds from a request's headers to the end of its body (at most 1 MiB).
BODY_TIMEOUT = 30.0


class DeadlineConfig(uvicorn.Config):
    """uvicorn's configuration with the two deadlines (the protocol reads them from it)."""

    def __init__(
        self, app: Any, *, header_timeout: float = HEADER_TIMEOUT, body_timeout: float = BODY_TIMEOUT, **kwargs: Any
    ) -> None:
        super().__init__(app, **kwargs)
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout


def _timeout_answer() -> bytes:
    refusal = errors.request_timeout()
    body = msgspec.json.encode(
        {"ok": False, "error": {"code": str(refusal.code), "message": refusal.message, "details": {}}}
    )
    head = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
    )
    return head + body


_TIMEOUT_ANSWER = _timeout_answer()


class DeadlineHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with deadlines on reading each request (module docstring)."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._header_timeout = float(getattr(config, "header_timeout", HEADER_TIMEOUT))
        self._body_timeout = float(getattr(config, "body_timeout", BODY_TIMEOUT))
        self._deadline: asyncio.TimerHandle | None = None
        self._begun = False  # a byte of the request being read has come
        self._reading_body = False

    def _arm(self, seconds: float, body: bool) -> None:
        self._disarm()
        self._reading_body = body
        self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        """The request did not arrive in time: answer 408 unless answered already, and close."""
        self._deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        # reading a body: answered if the app began its response; reading headers: nothing
        # to answer if no byte came (a connection opened and left idle)
        answered = (cycle is not None and cycle.response_started) if self._reading_body else not self._begun
        if not answered:
            self.transport.write(_TIMEOUT_ANSWER)
        if cycle is not None:
            cycle.keep_alive = False
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self._header_timeout, body=False)  # the first request's headers, from the opening

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        self._begun = True
        if self._deadline is None:  # a later request on a kept-alive connection
            self._arm(self._header_timeout, body=False)
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._arm(self._body_timeout, body=True)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        self._begun = False
        super().on_message_complete()
