"""A subcommand per command and per read, generated from the operation table (SPEC §7).

``eventcoord claim-issue --session-id S --project P --issue P-1``: each struct field is an
option of the same name; the body sent is exactly the options given. Output is a table or a
summary, or with ``--json`` the server's answer unchanged. Exit codes: 0 done, 1 refused,
2 usage, 3 server unreachable or 5xx, 4 401/403, 5 waiting in line (``--wait`` joined one).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import msgspec
import msgspec.inspect as mi

from eventcoord.client.guide import FIELD, SUMMARY, describe
from eventcoord.client.operations import OPERATIONS, Operation

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_DENIED, EXIT_WAITING = 0, 1, 2, 3, 4, 5
EXIT_CODES = (
    "exit codes: 0 done; 1 refused by the service (its code is the first word on stderr); 2 usage error; "
    "3 server unreachable or 5xx; 4 401/403; 5 not granted but waiting in line (--wait joined or kept a place)"
)
#: What an option means on the command line beyond the field's meaning.
CLI_HELP = {"wait": "; the command then exits 5 (waiting in line), not 1"}

#: Per-command extras: options and behaviour only the CLI has (set by cli.hook).
Extra = Callable[[argparse.ArgumentParser], None]
EXTRAS: dict[str, Extra] = {}


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None


def _unwrap(t: mi.Type) -> tuple[mi.Type, bool]:
    """The type without its Metadata and ``| None``, and whether None was allowed."""
    if isinstance(t, mi.Metadata):
        return _unwrap(t.type)
    if isinstance(t, mi.UnionType):
        rest = [x for x in t.types if not isinstance(x, mi.NoneType)]
        if len(rest) == 1:
            inner, _ = _unwrap(rest[0])
            return inner, len(rest) != len(t.types)
    return t, False


def _add_field(p: argparse.ArgumentParser, op: Operation, f: mi.Field) -> None:
    t, nullable = _unwrap(f.type)
    dest = f.encode_name
    positional = f.encode_name in op.positional or f.name in op.positional
    flag = "--" + f.encode_name.replace("_", "-")
    about = FIELD.get(f.encode_name)
    kwargs: dict[str, Any] = {"default": None, "help": about and about + CLI_HELP.get(f.encode_name, "")}
    if isinstance(t, mi.BoolType):  # never positional: --force, --exclusive/--no-exclusive, --live/--no-live
        action = argparse.BooleanOptionalAction if (nullable or f.default is True) else "store_true"
        p.add_argument(flag, dest=dest, action=action, default=None, help=kwargs["help"])
        return
    if isinstance(t, mi.IntType):
        kwargs["type"] = int
    elif isinstance(t, mi.LiteralType):
        kwargs["choices"] = list(t.values)
    elif isinstance(t, mi.ListType):
        kwargs["nargs"] = "+"
    elif isinstance(t, mi.AnyType):
        kwargs["type"] = _json_value
        kwargs["metavar"] = "JSON"
    if f.default is msgspec.NODEFAULT and f.default_factory is msgspec.NODEFAULT and not f.required and nullable:
        kwargs["help"] = f"{kwargs['help'] or ''} ('' sends null)".strip()
    if positional:
        kwargs.pop("default")
        p.add_argument(dest, **kwargs)
        return
    p.add_argument(flag, dest=dest, required=f.required, **kwargs)


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
    for op in OPERATIONS:
        p = sub.add_parser(
            op.cli,
            help=SUMMARY.get(op.name, op.name).split(". ")[0],
            description=describe(op.name),
            epilog=EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(fn=run, _op=op)
        if chosen is not None and op.cli != chosen:
            continue
        for f in sorted(op.fields(), key=lambda f: f.name == "command_id"):
            _add_field(p, op, f)
        _common(p)
        if op.kind == "command":
            p.add_argument("--print", dest="_print", metavar="FIELD", help="print only this field of the result")
        extra = EXTRAS.get(op.name)
        if extra is not None:
            extra(p)


def values_of(args: argparse.Namespace, op: Operation) -> dict[str, Any]:
    """The fields given on the command line, by wire name ('' for a nullable-unset field is null)."""
    out: dict[str, Any] = {}
    for f in op.fields():
        value = getattr(args, f.encode_name, None)
        if value is None:
            continue
        if value == "" and not f.required and f.default is msgspec.NODEFAULT:
            value = None
        out[f.encode_name] = value
    return out


def run(args: argparse.Namespace) -> int:
    """Send the operation, print the answer, return the exit code."""
    from eventcoord.cli import output
    from eventcoord.client import Client, Unreachable

    op: Operation = args._op
    values = values_of(args, op)
    before = getattr(args, "_before", None)
    if before is not None:
        code = before(args, values)
        if code is not None:
            return int(code)
    try:
        with Client(args._url, args._token) as client:
            if op.kind == "command":
                reply = client.send({"type": op.name, **values})
            else:
                from eventcoord.client.operations import read_request

                path, params = read_request(op, values)
                reply = client.fetch(path, params)
            code = output.show(op, reply, args, client)
            after = getattr(args, "_after", None)
            if code == EXIT_OK and after is not None:
                code = after(args, values, reply)
            return int(code)
    except Unreachable as e:
        output.fail("UNREACHABLE", f"cannot reach the eventcoord server: {e}")
        return EXIT_UNREACHABLE
