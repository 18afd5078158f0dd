"""Server-Sent Events over real HTTP: many streams share one tail, keep-alives, slow clients."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import httpx
from tests.helpers import BOOTSTRAP, Api, ServerProcess


async def _read_stream(
    base_url: str, token: str, count: int, headers: dict[str, str] | None = None, params: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The first ``count`` events of one SSE stream, parsed (keep-alive comments skipped)."""
    got: list[dict[str, Any]] = []
    hdrs = {"authorization": f"Bearer {token}", **(headers or {})}
    async with httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(60.0)) as http:
        async with http.stream("GET", "/v1/events/stream", headers=hdrs, params=params) as r:
            assert r.status_code == 200
            ident = None
            async for line in r.aiter_lines():
                if line.startswith("id: "):
                    ident = int(line[4:])
                elif line.startswith("data: "):
                    ev = json.loads(line[6:])
                    assert ev["position"] == ident
                    got.append(ev)
                    if len(got) == count:
                        return got
    raise AssertionError("the stream ended")


async def _open_streams(api: Api) -> float:
    """``eventcoord_sse_streams`` from /metrics."""
    text = (await api.http.get("/metrics")).text
    return next(float(line.split()[1]) for line in text.splitlines() if line.startswith("eventcoord_sse_streams "))


async def test_many_streams_receive_the_same_events_in_order_and_resume(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server()
    api = Api(server.base_url)
    other = await api.client("admin", workspace="elsewhere")
    try:
        sid = await api.register(actor="a")
        osid = await other.register(actor="b")
        streams = [asyncio.create_task(_read_stream(server.base_url, BOOTSTRAP, 61)) for _ in range(60)]
        messages = asyncio.create_task(_read_stream(server.base_url, BOOTSTRAP, 30, params={"type": ["MessagePosted"]}))
        beats = asyncio.create_task(
            _read_stream(server.base_url, BOOTSTRAP, 31, params={"type": ["MessagePosted", "AgentRegistered"]})
        )

        async def following(n: int) -> float:
            while (count := await _open_streams(api)) < n:
                await asyncio.sleep(0.05)
            return count

        assert await asyncio.wait_for(following(62), 30) == 62  # every stream follows the one tail now
        for i in range(30):
            await api.ok({"type": "heartbeat_agent", "session_id": sid})
            await other.ok({"type": "heartbeat_agent", "session_id": osid})
            await api.ok({"type": "post_message", "session_id": sid, "channel": "issue:X-1", "body": f"m{i}"})
        ours = [e["position"] for e in await api.events()]
        assert len(ours) == 61
        later = [p for p in ours if p > 31]
        resumed = asyncio.create_task(_read_stream(server.base_url, BOOTSTRAP, len(later), {"last-event-id": "31"}))
        for s in streams:
            got = await asyncio.wait_for(s, 60)
            assert [e["position"] for e in got] == ours  # same events, same order, no gaps
            assert all(json.loads(json.dumps(e["metadata"]))["workspace"] == "default" for e in got)
        assert [e["position"] for e in await asyncio.wait_for(resumed, 60)] == later
        posted = [e["position"] for e in await api.events("MessagePosted")]
        assert [e["position"] for e in await asyncio.wait_for(messages, 60)] == posted  # filtered by type
        assert [e["type"] for e in await asyncio.wait_for(beats, 60)] == ["AgentRegistered"] + ["MessagePosted"] * 30
    finally:
        await other.close()
        await api.close()


async def test_a_quiet_stream_receives_keep_alive_comments(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server(extra_env={"EVENTCOORD_SSE_KEEPALIVE_SECONDS": "0.2"})
    async with httpx.AsyncClient(base_url=server.base_url, timeout=httpx.Timeout(30.0)) as http:
        async with http.stream("GET", "/v1/events/stream", headers={"authorization": f"Bearer {BOOTSTRAP}"}) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            comments = 0
            async for line in r.aiter_lines():
                if line == ": keep-alive":
                    comments += 1
                    if comments == 3:
                        break
                else:
                    assert line in ("", ": eventcoord stream"), line


async def test_a_stalled_or_closed_client_does_not_block_the_others(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server()
    api = Api(server.base_url)
    try:
        sid = await api.register(actor="a")
        # A client that opens a stream and never reads: its socket buffers fill up.
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", server.port))
        stalled.sendall(
            f"GET /v1/events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {BOOTSTRAP}\r\n\r\n".encode()
        )
        # A client that goes away mid-stream.
        gone = asyncio.create_task(_read_stream(server.base_url, BOOTSTRAP, 10**6))
        readers = [asyncio.create_task(_read_stream(server.base_url, BOOTSTRAP, 301)) for _ in range(5)]
        body = "x" * 4000
        for i in range(300):  # ~1.3 MB of frames: far more than the stalled socket can buffer
            await api.ok({"type": "post_message", "session_id": sid, "channel": "issue:X-1", "body": body})
            if i == 50:
                gone.cancel()
        for r in readers:
            got = await asyncio.wait_for(r, 60)
            assert [e["position"] for e in got] == list(range(1, 302))
        # The server still answers, and a new stream still catches up from the start.
        assert len(await asyncio.wait_for(_read_stream(server.base_url, BOOTSTRAP, 301), 60)) == 301
        stalled.close()
    finally:
        await api.close()
