"""Subcommands that run or manage the service itself.

serve, migrate, token create/list/revoke, tail (rebuild: cli.history).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import socket

    from sqlalchemy import Connection

    from eventcoord.codec import WireEvent
    from eventcoord.config import Settings

T = TypeVar("T")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", dest="db_url", help="database URL (EVENTCOORD_DB_URL); default SQLite under --data-dir")
    p.add_argument("--data-dir", dest="data_dir", help="data folder (default ./.eventcoord)")


def _settings(args: argparse.Namespace) -> Settings:
    from eventcoord.config import from_env

    keys = ("db_url", "data_dir", "nats", "nats_stream", "host", "port", "ttl_seconds", "snapshot_every")
    return from_env(**{k: getattr(args, k, None) for k in keys})


def uvicorn_options() -> dict[str, object]:
    """The fastest event loop and HTTP parser installed (uvloop; httptools, writes gathered, reads under deadlines)."""
    extra: dict[str, object] = {}
    with contextlib.suppress(ImportError):
        import uvloop  # noqa: F401

        extra["loop"] = "uvloop"
    with contextlib.suppress(ImportError):
        import httptools  # noqa: F401

        from eventcoord.api.coalesced_writes import CoalescingHttpToolsProtocol

        extra["http"] = CoalescingHttpToolsProtocol  # httptools, one write per response
    return extra


def freeze_startup_heap(_app: object = None) -> None:
    """Put every object alive once the service has started out of the cyclic collector's reach.

    The modules, the app, the schema and the runtime live as long as the process, and a
    full collection walked all of them again: 70-150 ms with the event loop stopped, every
    few seconds under load, which was the p99 of every command
    (docs/decisions/0008-freeze-the-startup-heap.md; bench/gc_traced_serve.py). Garbage from
    the start is collected first, so nothing is frozen
    that could be freed; objects made while serving are collected as before.
    """
    from eventcoord import metrics

    gc.collect()
    gc.freeze()
    metrics.GC_FROZEN.set(gc.get_freeze_count())


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, before anything else starts: a busy port is one clear line."""
    import errno
    import socket

    from eventcoord.config import ConfigError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        reason = "the port is in use (another server?)" if e.errno == errno.EADDRINUSE else e.strerror or str(e)
        raise ConfigError(
            f"cannot listen on {host}:{port}: {reason}; choose another --port / EVENTCOORD_PORT"
        ) from None
    return sock


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the HTTP service (migrating the database first)."""
    import asyncio
    import logging

    import uvicorn

    from eventcoord.api.app import create_app
    from eventcoord.api.read_deadlines import DeadlineConfig

    settings = _settings(args)
    sock = listen_socket(settings.host, settings.port)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    extra = uvicorn_options()
    app = create_app(settings)
    app.on_startup.append(freeze_startup_heap)
    config = DeadlineConfig(
        app,
        header_timeout=settings.header_timeout_seconds,
        body_timeout=settings.body_timeout_seconds,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        # Server-Sent Events streams never end on their own: on SIGTERM give requests in
        # flight a few seconds, then close the streams (clients resume with Last-Event-ID).
        timeout_graceful_shutdown=3,
        **extra,
    )
    from eventcoord.first_run import ensure_admin_token

    token_path = asyncio.run(ensure_admin_token(settings))
    if token_path is not None:
        print(f"admin token of workspace default: {token_path}", flush=True)
    bound = sock.getsockname()
    where = f"http://{settings.host}:{bound[1]} ({settings.database_url.split('://')[0]})"

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:  # the app has started and accepts connections
                print(f"eventcoord serving on {where}", flush=True)

    Server(config).run(sockets=[sock])
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """Apply the Alembic migrations to the database."""
    import asyncio

    from eventcoord.store import open_store

    async def run() -> None:
        store = open_store(_settings(args).database_url)
        await store.migrate()
        print("migrated", flush=True)

    asyncio.run(run())
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    """Create a bearer token for a workspace and role; prints it once."""
    import asyncio

    from eventcoord.auth import hash_token, new_token, store_token, token_id_of
    from eventcoord.sanitize import is_workspace
    from eventcoord.store import open_store

    if not is_workspace(args.workspace):
        print(f"invalid workspace name {args.workspace!r}: use [A-Za-z0-9_-]{{1,64}}", file=sys.stderr)
        return 2
    token = new_token()

    async def run() -> None:
        store = open_store(_settings(args).database_url)
        await store.start()
        await store.migrate()
        try:
            from eventcoord.store import dbclock

            await store.transact(lambda c: store_token(c, token, args.workspace, args.role, dbclock.read(c)[0]))
        finally:
            await store.close()

    asyncio.run(run())
    print(token)
    print(f"token_id {token_id_of(hash_token(token))}", file=sys.stderr)
    return 0


def _on_store(args: argparse.Namespace, fn: Callable[[Connection], T]) -> T:
    """Run ``fn`` in one transaction on the store named by ``--db`` / ``--data-dir``."""
    import asyncio

    from eventcoord.store import open_store

    async def run() -> T:
        store = open_store(_settings(args).database_url)
        await store.start()
        await store.migrate()
        try:
            return await store.transact(fn)
        finally:
            await store.close()

    return asyncio.run(run())


def cmd_token_list(args: argparse.Namespace) -> int:
    """List tokens (ids, never secrets), optionally of one workspace."""
    from eventcoord.auth import list_tokens
    from eventcoord.codec import encode, format_time

    rows = _on_store(args, lambda c: list_tokens(c, args.workspace))
    out = [
        {
            "token_id": r["token_id"],
            "workspace": r["workspace"],
            "role": r["role"],
            "created_at": format_time(int(str(r["created_us"]))),
            "revoked_at": None if r["revoked_us"] is None else format_time(int(str(r["revoked_us"]))),
        }
        for r in rows
    ]
    if args.json:
        print(encode({"tokens": out}).decode())
        return 0
    for r in out:
        state = "active" if r["revoked_at"] is None else f"revoked {r['revoked_at']}"
        print(f"{r['token_id']}  {r['workspace']}  {r['role']}  created {r['created_at']}  {state}")
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    """Revoke a token by its id: refused on every replica within a second."""
    from eventcoord.auth import revoke_stored_token
    from eventcoord.store import dbclock

    if not _on_store(args, lambda c: revoke_stored_token(c, args.token_id, dbclock.read(c)[0])):
        print(f"NOT_FOUND no token {args.token_id!r}", file=sys.stderr)
        return 1
    print(f"revoked {args.token_id}")
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    """Print events as JSON lines: the log after --after, then live (SSE, or NATS with --nats)."""
    import asyncio

    from eventcoord.codec import encode

    types = set(args.type or [])

    async def run() -> None:
        source: AsyncIterator[WireEvent]
        if args.nats:
            from eventcoord.client import subscribe

            source = subscribe(
                args.nats, args.workspace or "*", sorted(types) or None, args.after, args.nats_stream or "EVENTCOORD"
            )
        else:
            from eventcoord.client import AsyncClient

            source = AsyncClient(args.url, args.token).stream(args.after, sorted(types) or None)
        async for ev in source:
            if not types or ev.type in types:
                print(encode(ev).decode(), flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """serve, migrate, token create and tail."""
    serve = sub.add_parser("serve", help="run the service")
    _common(serve)
    serve.add_argument("--nats", help="embedded | off | nats://host:port (EVENTCOORD_NATS_URL)")
    serve.add_argument("--nats-stream", dest="nats_stream", help="JetStream stream name (default EVENTCOORD)")
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="bind port (default 8765)")
    serve.add_argument(
        "--ttl-seconds", dest="ttl_seconds", type=int, help="liveness TTL kept in the database (default 120)"
    )
    serve.add_argument(
        "--snapshot-every",
        dest="snapshot_every",
        type=int,
        help="snapshot the read models every N events for as_of reads "
        "(EVENTCOORD_SNAPSHOT_EVERY; default 5000, 0 = off)",
    )
    serve.set_defaults(fn=cmd_serve)
    migrate = sub.add_parser("migrate", help="apply database migrations")
    _common(migrate)
    migrate.set_defaults(fn=cmd_migrate)
    token = sub.add_parser("token", help="manage tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    create = token_sub.add_parser("create", help="create a token")
    _common(create)
    create.add_argument("--workspace", required=True)
    create.add_argument("--role", required=True, choices=["admin", "human", "agent", "reader"])
    create.set_defaults(fn=cmd_token)
    listing = token_sub.add_parser("list", help="list tokens: id, workspace, role, created, revoked (never the secret)")
    _common(listing)
    listing.add_argument("--workspace", help="only this workspace")
    listing.add_argument("--json", action="store_true", help='print {"tokens": [...]}')
    listing.set_defaults(fn=cmd_token_list)
    revoke = token_sub.add_parser(
        "revoke", help="revoke a token by its token_id (every replica refuses it within a second)"
    )
    _common(revoke)
    revoke.add_argument("token_id")
    revoke.set_defaults(fn=cmd_token_revoke)
    tail = sub.add_parser("tail", help="follow the event log (SSE from a server, or NATS with --nats)")
    tail.add_argument("--after", type=int, default=0, help="start after this position")
    tail.add_argument("--type", action="append", help="only this event type (repeatable)")
    tail.add_argument("--url", help="server URL (EVENTCOORD_URL; default http://127.0.0.1:8765)")
    tail.add_argument("--token", help="bearer token (EVENTCOORD_TOKEN, or the local data folder's admin-token)")
    tail.add_argument("--nats", help="read from JetStream at this nats:// URL instead of the server")
    tail.add_argument("--nats-stream", dest="nats_stream", help="JetStream stream (default EVENTCOORD)")
    tail.add_argument("--workspace", help="with --nats: only this workspace")
    tail.set_defaults(fn=cmd_tail)
