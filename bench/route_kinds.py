"""What Litestar's route kinds cost the command endpoint: an HTTP route vs an ASGI route.

``POST /v1/commands`` reads its headers from the raw scope, its body from the ASGI channel,
and answers with a bare ASGI app (``api/answers.py``). As an HTTP route Litestar still
builds a ``Request``, parses the handler's signature model, runs the ``before_request``
hook and resolves the answer; as an ASGI route (``api/routes/commands.py``) it routes the
request and calls the handler. This calls two apps configured as ``create_app`` configures
eventcoord's (exception handlers, the parameter hook), each with one handler that does
what the command endpoint does around a command (reads the headers and the body, sends a
``CommandAnswer``), in this process, without a socket or a store, alternating the two
``--rounds`` times: microseconds per request of each.

    .venv/bin/python bench/route_kinds.py
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from litestar import Litestar, MediaType, Request, asgi, post
from litestar.types import ASGIApp

from eventcoord.api import params
from eventcoord.api.answers import CommandAnswer
from eventcoord.api.body import read_body
from eventcoord.api.errors import EXCEPTION_HANDLERS

BODY = b'{"type":"heartbeat_agent","session_id":"s-0188f2a4c1d2e3f4a5b6c7d8e9f0a1b2"}'
ANSWER = b'{"ok":true,"result":{},"events":[{"position":1,"type":"AgentHeartbeat"}],"position":1}'
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"authorization", b"Bearer tok_0123456789abcdef01234567"),
    (b"content-type", b"application/json"),
    (b"content-length", str(len(BODY)).encode()),
]


def _headers(scope: Any) -> bytes | None:
    length = None
    for name, value in scope["headers"]:
        if name == b"content-length":
            length = value
    return length


@post("/v1/commands", status_code=200, media_type=MediaType.JSON)
async def http_route(request: Request[Any, Any, Any]) -> ASGIApp:
    """The endpoint as an HTTP route (as it was before it became an ASGI route)."""
    await read_body(request.receive, _headers(request.scope))
    return CommandAnswer(ANSWER, 200)


@asgi("/v1/commands", copy_scope=False)
async def asgi_route(scope: Any, receive: Any, send: Any) -> None:
    """The endpoint as an ASGI route (as ``api/routes/commands.py`` serves it)."""
    await read_body(receive, _headers(scope))
    await CommandAnswer(ANSWER, 200)(scope, receive, send)


def _app(handler: Any) -> Litestar:
    return Litestar(
        route_handlers=[handler],
        exception_handlers=EXCEPTION_HANDLERS,
        before_request=params.before_request,
        debug=False,
    )


async def per_request(app: Litestar, n: int) -> float:
    """Microseconds per request of ``app``, over ``n`` requests."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/commands",
        "raw_path": b"/v1/commands",
        "query_string": b"",
        "root_path": "",
        "headers": HEADERS,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": BODY, "more_body": False}

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    started = time.perf_counter()
    for _ in range(n):
        sent.clear()
        await app({**scope, "state": {}}, receive, send)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    assert sent[0]["status"] == 200, sent
    return elapsed / n * 1e6


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=20000, help="requests per measurement (default 20000)")
    p.add_argument("--rounds", type=int, default=5, help="alternated measurements of each (default 5)")
    args = p.parse_args()
    apps = {"HTTP route": _app(http_route), "ASGI route": _app(asgi_route)}
    for app in apps.values():
        await per_request(app, 1000)  # warm-up
    results: dict[str, list[float]] = {name: [] for name in apps}
    for _ in range(args.rounds):
        for name, app in apps.items():
            results[name].append(await per_request(app, args.requests))
    for name, us in results.items():
        print(f"{name}: {', '.join(f'{u:.1f}' for u in us)} us per request (median {sorted(us)[len(us) // 2]:.1f})")


if __name__ == "__main__":
    asyncio.run(main())
