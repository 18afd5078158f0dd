"""One socket write per response (``api/coalesced_writes.py``), over a real uvicorn server.

The server runs ``CoalescingHttpToolsProtocol`` on a real socket; below its gathering
layer each write to the connection's real transport is recorded. A plain answer (status
line, headers and body, two ASGI messages) must reach the socket in one write and arrive
whole; a streamed answer must still reach the client event by event, not at its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn

from eventcoord.api.coalesced_writes import CoalescingHttpToolsProtocol

WRITES: list[bytes] = []


class _RecordingTransport:
    """The real transport, with what is written to it recorded."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def write(self, data: bytes) -> None:
        WRITES.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Recorded(CoalescingHttpToolsProtocol):
    def connection_made(self, transport: Any) -> None:
        super().connection_made(_RecordingTransport(transport))


STREAM_GO = asyncio.Event()


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/stream":  # two events, the second only once the client saw the first
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: one\n\n", "more_body": True})
        await STREAM_GO.wait()
        await send({"type": "http.response.body", "body": b"data: two\n\n", "more_body": False})
        return
    body = b'{"ok":true}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def server() -> AsyncIterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, http=_Recorded, log_level="warning", lifespan="on")
    srv = uvicorn.Server(config)
    task = asyncio.create_task(srv.serve())
    while not srv.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_response_reaches_the_socket_in_one_write(server: str) -> None:
    async with httpx.AsyncClient(base_url=server) as client:
        for _ in range(3):  # on one kept-alive connection
            WRITES.clear()
            r = await client.post("/v1/commands", content=b"{}")
            assert r.status_code == 200 and r.json() == {"ok": True}
            assert r.headers["content-type"] == "application/json"
            assert len(WRITES) == 1, WRITES
            assert WRITES[0].startswith(b"HTTP/1.1 200 OK\r\n") and WRITES[0].endswith(b'\r\n\r\n{"ok":true}')


async def test_a_stream_still_goes_out_event_by_event(server: str) -> None:
    STREAM_GO.clear()
    async with httpx.AsyncClient(base_url=server) as client, client.stream("GET", "/stream") as r:
        lines = r.aiter_lines()
        first = await asyncio.wait_for(lines.__anext__(), 5)
        assert first == "data: one"  # arrived while the stream is still open
        STREAM_GO.set()
        rest = [line async for line in lines if line]
    assert rest == ["data: two"]


def test_eventcoord_serve_and_the_no_op_stack_run_it() -> None:
    """``eventcoord serve`` runs the gathering protocol, and so does the benchmarks' no-op
    stack (it takes serve's options): a ratio between them compares handlers, not servers."""
    from eventcoord.cli.server import uvicorn_options

    assert uvicorn_options()["http"] is CoalescingHttpToolsProtocol
