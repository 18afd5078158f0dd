"""One request of a subcommand to the server, and its answer: the exit codes, the server as
found (``client.locate``), the answer and the refusal it may carry.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from eventcoord.cli.subcommands import Subcommand

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_DENIED, EXIT_WAITING = 0, 1, 2, 3, 4, 5
EXIT_CODES = (
    "exit codes: 0 done; 1 refused by the service (its code is the first word on stderr); 2 usage error; "
    "3 server unreachable or 5xx; 4 401/403; 5 not granted but waiting in line (--wait joined or kept a place)"
)
COMMANDS_PATH = "/v1/commands"
#: Seconds a subcommand waits for the server's whole answer.
TIMEOUT_SECONDS = 30.0


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
