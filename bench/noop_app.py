"""The HTTP stack of ``eventcoord serve`` with a no-op command handler: the baseline.

Same Litestar settings as :func:`eventcoord.api.app.create_app` (the exception handlers,
``request_max_body_size``, the OpenAPI config, ``debug=False``) and the same uvicorn
options as ``eventcoord serve`` (``uvloop`` and ``httptools`` when installed, access log
off, lifespan on). ``POST /v1/commands`` reads the body and answers a small constant JSON;
no auth, no decoding, no database. ``GET /health`` answers for readiness polling.

    .venv/bin/python bench/noop_app.py --port 18700
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.openapi import OpenAPIConfig

from eventcoord.api.body import MAX_BODY
from eventcoord.api.errors import EXCEPTION_HANDLERS

#: The size and shape of a real heartbeat answer, so both servers send similar bytes.
ANSWER = (
    b'{"ok":true,"result":{"last_heartbeat_at":"2026-01-01T00:00:00.000000Z"},'
    b'"events":[{"position":1,"type":"AgentHeartbeat"}],"position":1}'
)


@post("/v1/commands", operation_id="postCommand", status_code=200, media_type=MediaType.JSON)
async def noop_command(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Read the body, answer a constant: the cost of the HTTP stack alone."""
    await request.body()
    return Response(ANSWER, status_code=200, media_type=MediaType.JSON)


@get("/health", operation_id="health", media_type=MediaType.JSON)
async def health() -> Response[bytes]:
    """Readiness."""
    return Response(b'{"status":"ok"}', media_type=MediaType.JSON)


def create_noop_app() -> Litestar:
    """The Litestar app, configured as ``create_app`` configures eventcoord's."""
    return Litestar(
        route_handlers=[noop_command, health],
        exception_handlers=EXCEPTION_HANDLERS,
        request_max_body_size=MAX_BODY,
        openapi_config=OpenAPIConfig(title="eventcoord-noop", version="0.1.0", path="/schema"),
        debug=False,
    )


def uvicorn_options() -> dict[str, object]:
    """The loop and HTTP parser options ``eventcoord serve`` picks (the same function)."""
    from eventcoord.cli.server import uvicorn_options as serve_options

    return serve_options()


def main() -> None:
    """Serve the no-op app until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18700)
    args = parser.parse_args()
    config = uvicorn.Config(
        create_noop_app(),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        **uvicorn_options(),  # type: ignore[arg-type]
    )
    print(f"noop serving on http://{args.host}:{args.port}", flush=True)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
