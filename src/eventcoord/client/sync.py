"""``Client``: the typed client, synchronous, on the standard library's ``http.client``.

No httpx here on purpose: importing it (and building its TLS context) costs more than the
rest of a CLI invocation, and the CLI is a sync client. One keep-alive connection, opened
on first use; a request on a connection the server closed while idle is sent again once.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

import msgspec

from eventcoord.client.generated import Operations
from eventcoord.client.locate import locate
from eventcoord.client.operations import BY_NAME, COMMANDS_PATH, read_request
from eventcoord.client.reply import JSON_BODY, WIRE_EVENT, Reply, auth_headers, encode
from eventcoord.codec import WireEvent
from eventcoord.errors import Unreachable

R = TypeVar("R")
#: Failures of a reused keep-alive connection that mean "the server closed it while idle".
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


def _query(params: dict[str, Any] | None) -> str:
    if not params:
        return ""
    text = {k: ("true" if v else "false") if isinstance(v, bool) else v for k, v in params.items() if v is not None}
    return "?" + urlencode(text, doseq=True)


class Client(Operations):
    """A synchronous client: ``Client().claim_issue(session_id=…, project=…, issue=…)``.

    The server and token are found as docs/protocol.md#clients says (``url``/``token``, the environment,
    the local data folder). Refusals raise ``eventcoord.client.Refused`` subclasses; no
    answer at all raises ``Unreachable``.
    """

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.target = locate(url, token)
        parts = urlsplit(self.target.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {self.target.url!r}")
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")
        self._headers = auth_headers(self.target)
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def send(self, command: msgspec.Struct | dict[str, Any]) -> Reply:
        """POST one command; the answer unchanged (refusals included). Raises only Unreachable."""
        return self._call("POST", COMMANDS_PATH, body=encode(command), headers=JSON_BODY)

    def fetch(self, path: str, params: dict[str, Any] | None = None) -> Reply:
        """GET a read route; the answer unchanged. Raises only Unreachable."""
        return self._call("GET", path + _query(params))

    def command(self, body: dict[str, Any]) -> Any:
        """Send an untyped command; its ``result`` as builtins, or raise its Refused."""
        reply = self.send(body)
        refused = reply.refusal()
        if refused is not None:
            raise refused
        return reply.payload().get("result")

    def get(self, path: str, **params: Any) -> Any:
        """GET any read route with query parameters; the body as builtins, or raise its Refused."""
        reply = self.fetch(path, params)
        refused = reply.refusal()
        if refused is not None:
            raise refused
        return reply.payload()

    def events(self, after: int = 0, limit: int = 100) -> list[WireEvent]:
        """One page of the log."""
        return self.read_events(after=after, limit=limit).events

    def stream(self, after: int = 0, timeout: float | None = None) -> Iterator[WireEvent]:
        """Every event after ``after``, then live, over Server-Sent Events (its own connection).

        ``timeout``: seconds a read may wait (the server sends a keep-alive every 15 s, so a
        longer silence means the connection is gone: Unreachable)."""
        conn = self._connect(timeout=timeout)
        try:
            conn.request("GET", self._prefix + "/v1/events/stream" + _query({"after": after}), headers=self._headers)
            r = conn.getresponse()
            if r.status >= 400:
                raise Reply(r.status, r.read()).refusal() or Unreachable(str(r.status))
            for raw in r:
                line = raw.rstrip(b"\r\n")
                if line.startswith(b"data: "):
                    yield WIRE_EVENT.decode(line[6:])
        except (OSError, http.client.HTTPException) as e:
            raise Unreachable(f"{self.target.url}: {e}") from e
        finally:
            conn.close()

    def _connect(self, timeout: float | None) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=timeout)

    def _call(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> Reply:
        for attempt in (0, 1):
            reused = self._conn is not None
            if self._conn is None:
                self._conn = self._connect(self._timeout)
            try:
                self._conn.request(method, self._prefix + path, body=body, headers={**self._headers, **(headers or {})})
                r = self._conn.getresponse()
                return Reply(r.status, r.read())
            except _STALE as e:
                self.close()
                if reused and attempt == 0:
                    continue
                raise Unreachable(f"{self.target.url}: {e}") from e
            except (TimeoutError, OSError, http.client.HTTPException) as e:
                self.close()
                raise Unreachable(f"{self.target.url}: {e}") from e
        raise AssertionError("unreachable")

    def _command(self, command: msgspec.Struct, result: type[R]) -> R:
        return self.send(command).decode(result, command=True)

    def _read(self, name: str, query: msgspec.Struct, result: type[R]) -> R:
        path, params = read_request(BY_NAME[name], query)
        return self.fetch(path, params).decode(result, command=False)
