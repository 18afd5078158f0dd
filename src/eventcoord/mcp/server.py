"""``eventcoord mcp``: an MCP server (official SDK) that is a thin client of a running eventcoord.

stdio (the default): one agent per process, so the process remembers its sessions and ends
them when stdin closes. Streamable HTTP (``--transport http --port N``, path ``/mcp``): one
MCP session per client (``Mcp-Session-Id``) acting as the bearer token that client sent,
with its own remembered sessions, ended when the client deletes its MCP session or has been
gone for ``--idle-timeout`` seconds.
The HTTP endpoint advertises the handshake protocol versions only: the 2026-07-28 protocol
has no connection to remember a session on, so clients in ``auto`` mode use the handshake.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from eventcoord.client import AsyncClient
from eventcoord.client.locate import locate
from eventcoord.mcp import tools
from eventcoord.mcp.sessions import Remembered

logger = logging.getLogger("eventcoord.mcp")
_STATE_KEY = "eventcoord.remembered"

INSTRUCTIONS = """eventcoord coordinates parallel agents working one backlog and one repository.
Workflow: register_agent once (this connection then remembers your session, heartbeats it and
ends it when you disconnect); get_issue_state or list_leases to choose work; claim_issue before
working on an issue (keep its fencing_token); claim_files before editing paths; read_messages on
agent:<your session_id> for notices; when what you need is held, either pick other work or pass
wait: true to join its FIFO line (you are granted it when it frees and told on agent:<session_id>;
list_waits shows the lines and your place; cancel_wait if you change your mind; a DEADLOCK refusal
means do not wait); verify_hold with your fencing_token right before you push or publish, and stop
if it is refused; release_issue (reason completed) when done; end_agent with
a handoff_note when you stop. Every refusal carries a code; the tool descriptions say what to do."""


class Bridge:
    """The MCP server's state: who each request acts as, and what each connection remembers.

    Over stdio the process is the one connection and acts as the token it found. Over HTTP
    each connection acts as the token its client presented (docs/protocol.md#under-attack):
    its own eventcoord client and remembered sessions, made on its first tool call.
    """

    def __init__(self, url: str, process_client: AsyncClient | None) -> None:
        self.url = url
        self.stdio = process_client is not None
        self.process_memory = Remembered(process_client) if process_client is not None else None

    async def call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """Run one tool as this request's token, with its connection's memory."""
        if self.process_memory is not None:
            mine = self.process_memory
            return await tools.call(mine.client, mine, params.name, params.arguments, True)
        access = get_access_token()
        if access is None:  # the HTTP app answers 401 before any handler runs; never lend
            return tools.tool_error("UNAUTHENTICATED", "send Authorization: Bearer <your eventcoord token>")
        memory = self._connection_memory(ctx, access.token)
        if memory is not None:
            return await tools.call(memory.client, memory, params.name, params.arguments, False)
        async with AsyncClient(self.url, access.token) as client:  # a request outside any connection
            return await tools.call(client, None, params.name, params.arguments, False)

    def _connection_memory(self, ctx: ServerRequestContext[Any, Any], token: str) -> Remembered | None:
        # The SDK keeps the per-client Connection (its ``state`` and teardown ``exit_stack``)
        # on the request's ServerSession; it has no public accessor in 2.3. The SDK binds the
        # connection to the token that opened it, so the first token seen is the only one.
        connection = getattr(ctx.session, "_connection", None)
        if connection is None or connection.session_id is None:
            return None
        memory: Remembered | None = connection.state.get(_STATE_KEY)
        if memory is None:
            client = AsyncClient(self.url, token)
            memory = connection.state[_STATE_KEY] = Remembered(client)
            connection.exit_stack.push_async_callback(client.close)
            connection.exit_stack.push_async_callback(memory.close)  # runs first: ends the sessions
        return memory


def build(bridge: Bridge) -> Server[Any]:
    """The low-level MCP server with eventcoord's tools."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.TOOLS)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            return await bridge.call(ctx, params)
        except Exception as e:  # the request boundary: a bug must not take the server down
            logger.exception("tool %s failed", params.name)
            return tools.tool_error("INTERNAL", f"the MCP server failed: {type(e).__name__}")

    server: Server[Any] = Server(
        "eventcoord",
        version="0.1.0",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    if not bridge.stdio:

        async def discover(
            ctx: ServerRequestContext[Any, Any], params: types.RequestParams | None
        ) -> types.DiscoverResult:
            return types.DiscoverResult(
                supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS),
                capabilities=server.get_capabilities(),
                instructions=INSTRUCTIONS,
            )

        server.add_request_handler("server/discover", types.RequestParams, discover)
    return server


async def serve_stdio(url: str | None, token: str | None) -> None:
    """Serve one client on stdin/stdout; end its sessions when stdin closes."""
    from mcp.server.stdio import stdio_server

    async with AsyncClient(url, token) as client:
        bridge = Bridge(client.target.url, client)
        memory = bridge.process_memory
        assert memory is not None
        server = build(bridge)

        async def terminate() -> None:
            # SIGTERM ends the sessions too, like a closed stdin. The stdin reader is a
            # thread that cancellation cannot interrupt, so exit once they are ended.
            await memory.close()
            os._exit(128 + signal.SIGTERM)

        with contextlib.suppress(NotImplementedError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(terminate()))
        try:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        finally:
            await memory.close()


async def serve_http(url: str | None, host: str, port: int, idle_timeout: float) -> None:
    """Serve streamable HTTP at ``/mcp`` until stopped; every request needs its own bearer token."""
    import uvicorn
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    from eventcoord.mcp.bearer import EventcoordTokens

    target = locate(url, None).url
    tokens = EventcoordTokens(target)
    server = build(Bridge(target, None))
    # eventcoord issues the tokens; there is no OAuth resource metadata to publish.
    auth = AuthSettings(issuer_url=AnyHttpUrl(target), resource_server_url=None)
    app = server.streamable_http_app(
        streamable_http_path="/mcp", host=host, session_idle_timeout=idle_timeout, auth=auth, token_verifier=tokens
    )
    print(
        f"eventcoord MCP server on http://{host}:{port}/mcp (eventcoord at {target}); "
        "each client sends its own token: Authorization: Bearer <token>",
        flush=True,
    )
    try:
        await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")).serve()
    finally:
        await tokens.close()


def main(args: argparse.Namespace) -> int:
    """Entry point of ``eventcoord mcp``."""
    # On stdio, stdout is the protocol channel: every log line goes to stderr.
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    if args.transport == "stdio":
        asyncio.run(serve_stdio(args.url, args.token))
    else:
        asyncio.run(serve_http(args.url, args.host, args.port, args.idle_timeout))
    return 0
