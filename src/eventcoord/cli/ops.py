"""A subcommand per command and per read, from the generated table ``cli.subcommands`` (docs/protocol.md#clients).

``eventcoord claim-issue --session-id S --project P --issue P-1``: each struct field is an
option of the same name; the body sent is exactly the options given. Output is a table or a
summary, or with ``--json`` the server's answer unchanged. Exit codes: 0 done, 1 refused,
2 usage, 3 server unreachable or 5xx, 4 401/403, 5 waiting in line (``--wait`` joined one).
The table is plain data and the request one ``client.oneshot`` exchange, so a subcommand
loads neither msgspec nor the command structs.
"""

from __future__ import annotations

import argparse
import json

from eventcoord.cli.exchange import (
    COMMANDS_PATH,
    EXIT_CODES,
    EXIT_OK,
    EXIT_UNREACHABLE,
    Server,
    Unreachable,
    read_path,
)
from eventcoord.cli.subcommands import SUBCOMMANDS
from eventcoord.client.guide import FIELD, SUMMARY, describe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from eventcoord.cli.subcommands import Option, Subcommand

#: What an option means on the command line beyond the field's meaning.
CLI_HELP = {"wait": "; the command then exits 5 (waiting in line), not 1"}
#: Options and behaviour only the CLI has, by operation: the function of ``cli.gate`` (the publish
#: gate) that adds them to the operation's subparser, loaded only when that subcommand runs.
EXTRAS: dict[str, str] = {"claim_issue": "record_option", "verify_hold": "verify_hold_options"}


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None


def _add_option(p: argparse.ArgumentParser, option: Option) -> None:
    field, kind = option["field"], option["kind"]
    flag = "--" + field.replace("_", "-")
    text = FIELD.get(field)
    if text and field in CLI_HELP:
        text += CLI_HELP[field]
    if kind in ("bool", "bool_optional"):  # --force, --exclusive/--no-exclusive, --live/--no-live
        action = argparse.BooleanOptionalAction if kind == "bool_optional" else "store_true"
        p.add_argument(flag, dest=field, action=action, default=None, help=text)
        return
    kwargs: dict[str, Any] = {"default": None}
    if kind == "int":
        kwargs["type"] = int
    elif kind == "choice":
        kwargs["choices"] = list(option.get("choices", ()))
    elif kind == "list":
        kwargs["nargs"] = "+"
    elif kind == "json":
        kwargs["type"], kwargs["metavar"] = _json_value, "JSON"
    if option.get("null_hint"):
        text = f"{text or ''} ('' sends null)".strip()
    if option.get("positional"):
        kwargs.pop("default")
        p.add_argument(field, help=text, **kwargs)
        return
    p.add_argument(flag, dest=field, required=option.get("required", False), help=text, **kwargs)


def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("server")
    g.add_argument(
        "--url", dest="_url", metavar="URL", help="server URL (EVENTCOORD_URL; default http://127.0.0.1:8765)"
    )
    g.add_argument(
        "--token",
        dest="_token",
        metavar="TOKEN",
        help="bearer token (EVENTCOORD_TOKEN; default ./.eventcoord/admin-token)",
    )
    g.add_argument("--json", dest="_json", action="store_true", help="print the server's JSON answer unchanged")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser], chosen: str | None) -> None:
    """One subparser per operation; only the ``chosen`` one (None: all) gets its options (start-up time)."""
    for cli, spec in SUBCOMMANDS.items():
        p = sub.add_parser(
            cli,
            help=SUMMARY.get(spec["name"], spec["name"]).split(". ")[0],
            description=describe(spec["name"]),
            epilog=EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(fn=run, _op=spec)
        if chosen is not None and cli != chosen:
            continue
        for option in spec["options"]:
            _add_option(p, option)
        _common(p)
        if spec["kind"] == "command":
            p.add_argument("--print", dest="_print", metavar="FIELD", help="print only this field of the result")
        extra = EXTRAS.get(spec["name"])
        if extra is not None:
            from eventcoord.cli import gate

            getattr(gate, extra)(p)


def values_of(args: argparse.Namespace, spec: Subcommand) -> dict[str, Any]:
    """The fields given on the command line, by wire name ('' for a nullable-unset field is null)."""
    out: dict[str, Any] = {}
    for option in spec["options"]:
        value = getattr(args, option["field"], None)
        if value is None:
            continue
        if value == "" and option.get("empty_is_null"):
            value = None
        out[option["field"]] = value
    return out


def main(argv: list[str]) -> int:
    """Run one operation's subcommand (``["verify-hold", "--issue", …]``) as the script would."""
    parser = argparse.ArgumentParser(prog="eventcoord")
    add_parsers(parser.add_subparsers(dest="command", required=True), argv[0])
    args = parser.parse_args(argv)
    return int(args.fn(args))


def run(args: argparse.Namespace) -> int:
    """Send the operation, print the answer, return the exit code."""
    from eventcoord.cli import output

    spec: Subcommand = args._op
    values = values_of(args, spec)
    before = getattr(args, "_before", None)
    if before is not None:
        code = before(args, values)
        if code is not None:
            return int(code)
    server = Server(args._url, args._token)
    try:
        if spec["kind"] == "command":
            answer = server.send("POST", COMMANDS_PATH, json.dumps({"type": spec["name"], **values}).encode())
        else:
            answer = server.read(*read_path(spec, values))
        code = output.show(spec, answer, args, server)
        after = getattr(args, "_after", None)
        if code == EXIT_OK and after is not None:
            code = after(args, values, answer)
        return int(code)
    except Unreachable as e:
        output.fail("UNREACHABLE", f"cannot reach the eventcoord server: {e}")
        return EXIT_UNREACHABLE
