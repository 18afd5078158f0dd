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

from eventcoord.cli.subcommands import SUBCOMMANDS
from eventcoord.client.guide import FIELD, SUMMARY, describe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from eventcoord.cli.subcommands import Option, Subcommand

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_DENIED, EXIT_WAITING = 0, 1, 2, 3, 4, 5
EXIT_CODES = (
    "exit codes: 0 done; 1 refused by the service (its code is the first word on stderr); 2 usage error; "
    "3 server unreachable or 5xx; 4 401/403; 5 not granted but waiting in line (--wait joined or kept a place)"
)
#: What an option means on the command line beyond the field's meaning.
CLI_HELP = {"wait": "; the command then exits 5 (waiting in line), not 1"}
COMMANDS_PATH = "/v1/commands"
#: Seconds a subcommand waits for the server's whole answer.
TIMEOUT_SECONDS = 30.0

#: Options and behaviour only the CLI has, by operation: the function of ``cli.hook`` (the publish
#: gate) that adds them to the operation's subparser, loaded only when that subcommand runs.
EXTRAS: dict[str, str] = {"claim_issue": "record_option", "verify_hold": "verify_hold_options"}


class Unreachable(Exception):
    """No answer from the server: not running, a wrong URL, a timeout, or a 5xx without an error envelope."""


class Refusal:
    """An error envelope's ``error`` member, with the HTTP status it came with."""

    __slots__ = ("code", "details", "message", "status")

    def __init__(self, code: str, message: str, details: dict[str, Any], status: int) -> None:
        self.code, self.message, self.details, self.status = code, message, details, status


class Answer:
    """The server's answer to one request, as it sent it."""

    __slots__ = ("body", "status")

    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body

    def payload(self) -> Any:
        """The body as JSON builtins."""
        return json.loads(self.body)

    def refusal(self) -> Refusal | None:
        """The refusal this answer carries, or None for a success; raises Unreachable for a bare 5xx."""
        if self.status < 400:
            return None
        try:
            error = self.payload()["error"]
            return Refusal(str(error["code"]), str(error.get("message", "")), error.get("details") or {}, self.status)
        except (ValueError, TypeError, KeyError):
            if self.status >= 500:
                raise Unreachable(f"server error {self.status}") from None
            return Refusal(f"HTTP_{self.status}", self.body.decode(errors="replace")[:200], {}, self.status)


class Server:
    """The server a subcommand talks to (found as docs/protocol.md#clients says), one request at a time."""

    def __init__(self, url: str | None, token: str | None) -> None:
        from eventcoord.client.locate import locate

        self.target = locate(url, token)

    def send(self, method: str, path: str, body: bytes | None = None) -> Answer:
        """One request; raises Unreachable when no answer came."""
        from eventcoord.client.oneshot import request

        try:
            return Answer(*request(method, self.target.url + path, self.target.token, body, TIMEOUT_SECONDS))
        except TimeoutError:
            raise Unreachable(f"{self.target.url}: no answer within {TIMEOUT_SECONDS:g} s") from None
        except (OSError, ValueError) as e:
            raise Unreachable(f"{self.target.url}: {e}") from e

    def read(self, path: str, params: dict[str, Any]) -> Answer:
        """GET a read route with query parameters (lists repeat the name; booleans are true/false)."""
        return self.send("GET", path + query(params))


def query(params: dict[str, Any]) -> str:
    """``?a=1&b=x`` for the parameters that are not None ('' when none are)."""
    given = {k: ("true" if v else "false") if isinstance(v, bool) else v for k, v in params.items() if v is not None}
    if not given:
        return ""
    from urllib.parse import urlencode

    return "?" + urlencode(given, doseq=True)


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
            from eventcoord.cli import hook

            getattr(hook, extra)(p)


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


def read_path(spec: Subcommand, values: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The URL path of a read (its ``{field}`` segments filled) and the rest of the values as parameters."""
    from urllib.parse import quote

    params = dict(values)
    path = spec["path"]
    for option in spec["options"]:
        token = "{" + option["field"] + "}"
        if token in path:
            path = path.replace(token, quote(str(params.pop(option["field"])), safe="/:"))
    return path, params


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
