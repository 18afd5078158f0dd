"""The ``eventcoord`` command line.

    serve, migrate, token create, tail              the service itself      (cli.server)
    rebuild, export, replay, archive                history (SPEC §8)       (cli.history)
    register-agent, claim-issue, … (every command)  generated from commands (cli.ops)
    agents, leases, state, … (every read)           generated from reads    (cli.ops)
    verify-hold, hook install, claim-issue --record the publish gate        (cli.hook)
    mcp                                             the MCP server          (eventcoord.mcp)
    github sync                                     the GitHub mirror       (cli.github)

Imports are lazy: a subcommand loads only what it uses, so the CLI starts fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _add_mcp(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def run(args: argparse.Namespace) -> int:
        from eventcoord.mcp.server import main as serve_mcp

        return serve_mcp(args)

    p = sub.add_parser("mcp", help="run the MCP server (stdio, or streamable HTTP at /mcp)")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default stdio")
    p.add_argument("--host", default="127.0.0.1", help="with --transport http: bind address")
    p.add_argument("--port", type=int, default=8766, help="with --transport http: port (default 8766)")
    p.add_argument(
        "--idle-timeout",
        dest="idle_timeout",
        type=float,
        default=120.0,
        help="with --transport http: end a client's MCP session (and its eventcoord sessions) "
        "after this many seconds without a request or an open stream (default 120)",
    )
    p.add_argument("--url", help="eventcoord server URL (EVENTCOORD_URL; default http://127.0.0.1:8765)")
    p.add_argument("--token", help="bearer token (EVENTCOORD_TOKEN; default ./.eventcoord/admin-token)")
    p.set_defaults(fn=run)


class _Version(argparse.Action):
    """``--version``: the installed distribution's version (read only when asked)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import version

        print(f"eventcoord {version('eventcoord')}")
        parser.exit()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; with ``argv``, only its subcommand gets its options (start-up time)."""
    from eventcoord.cli import github, history, hook, ops, server

    chosen = None if argv is None else next((a for a in argv if not a.startswith("-")), "")

    parser = argparse.ArgumentParser(prog="eventcoord", description="Event-sourced coordination for fleets of agents")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    server.add_parsers(sub)
    history.add_parsers(sub)
    ops.add_parsers(sub, chosen)
    hook.add_parsers(sub)
    _add_mcp(sub)
    github.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``eventcoord`` script; the exit code."""
    from eventcoord.config import ConfigError

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args.fn(args))
    except ConfigError as e:
        print(f"eventcoord: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
