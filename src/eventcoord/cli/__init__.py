"""The ``eventcoord`` command line; the console script starts here, importing only ``sys``.

    serve, migrate, token, tail; rebuild, export, verify, replay, archive   cli.server, cli.history
    register-agent, … (every command); agents, leases, … (every read)     cli.ops (generated)
    verify-hold, hook install, claim-issue --record; hook pre-commit       cli.hook, cli.commit_gate
    hook claude, hook codex; init; github sync                             cli.harness_hook, cli.init, cli.github
    mcp                                                                    eventcoord.mcp

A subcommand loads the one module that defines it, and ``hook claude|codex`` (run on every
tool call of a coding agent) loads nothing but the standard library.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

#: The subcommands each module defines, in ``--help`` order; ``None``: every other name (the
#: commands and reads of cli.ops).
FACES: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("server", frozenset({"serve", "migrate", "token", "tail"})),
    ("history", frozenset({"rebuild", "export", "verify", "replay", "archive"})),
    ("ops", None),
    ("hook", frozenset({"hook"})),
    ("init", frozenset({"init"})),
    ("mcp", frozenset({"mcp"})),
    ("github", frozenset({"github"})),
)


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
    p.add_argument(
        "--token",
        help="stdio: bearer token (EVENTCOORD_TOKEN; default ./.eventcoord/admin-token); "
        "not used over http, where each client sends its own",
    )
    p.set_defaults(fn=run)


def _faces_for(chosen: str | None) -> list[str]:
    """The modules whose subcommands the parser needs: the chosen one's, or all of them."""
    if not chosen:
        return [name for name, _ in FACES]
    for name, names in FACES:
        if names is not None and chosen in names:
            return [name]
    from eventcoord.cli.subcommands import SUBCOMMANDS

    if chosen in SUBCOMMANDS:
        return ["ops"]
    return [name for name, _ in FACES]  # not a subcommand: argparse names every choice


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; with ``argv``, only its subcommand is built with its options (start-up time)."""
    import argparse
    import importlib

    class Version(argparse.Action):
        """``--version``: the installed distribution's version (read only when asked)."""

        def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
            super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

        def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
            from importlib.metadata import version

            print(f"eventcoord {version('eventcoord')}")
            parser.exit()

    chosen = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    parser = argparse.ArgumentParser(prog="eventcoord", description="Event-sourced coordination for fleets of agents")
    parser.add_argument("--version", action=Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for face in _faces_for(chosen):
        if face == "mcp":
            _add_mcp(sub)
        elif face == "ops":
            from eventcoord.cli import ops

            ops.add_parsers(sub, chosen)
        else:
            importlib.import_module(f"eventcoord.cli.{face}").add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``eventcoord`` script; the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"] and argv[1:2] in (["claude"], ["codex"]):
        from eventcoord.cli import harness_hook

        code = harness_hook.main(argv[1:])
        if code is not None:
            return code  # else an option it leaves to argparse (--help, a mistake)
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        return 130
    except ValueError as e:
        # Only the subcommands that load eventcoord.config can raise its ConfigError.
        config = sys.modules.get("eventcoord.config")
        if config is None or not isinstance(e, config.ConfigError):
            raise
        print(f"eventcoord: {e}", file=sys.stderr)
        return 2
