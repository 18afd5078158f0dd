"""The one seam where clients do I/O: HTTP requests to the server, answers decoded or refused.

``Client`` and ``AsyncClient`` share everything but the httpx client under them. Their
per-command and per-read methods come from ``_generated.py``; this module gives them the
two primitives those methods call, plus the untyped ones (``command``, ``get``, ``send``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import httpx
import msgspec

from eventcoord.client._generated import AsyncOperations, Operations
from eventcoord.client.errors import Refused, Unreachable, refusal
from eventcoord.client.locate import Target, locate
from eventcoord.client.operations import BY_NAME, COMMANDS_PATH, read_request
from eventcoord.codec import WireEvent

R = TypeVar("R")
_wire = msgspec.json.Decoder(WireEvent)
_JSON = {"content-type": "application/json"}


class _Error(msgspec.Struct, frozen=True):
    code: str
    message: str = ""
    details: dict[str, Any] = {}


class _Envelope(msgspec.Struct, frozen=True):
    ok: bool | None = None
    result: msgspec.Raw = msgspec.Raw(b"null")
    error: _Error | None = None


_envelope = msgspec.json.Decoder(_Envelope)


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer as the server sent it: HTTP status and body bytes, unchanged."""

    status: int
    body: bytes

    def refusal(self) -> Refused | None:
        """The Refused this answer carries, or None for a success.

        Raises Unreachable for a 5xx without an error envelope.
        """
        if self.status < 400:
            return None
        try:
            env = _envelope.decode(self.body)
        except msgspec.DecodeError:
            env = _Envelope()
        if env.error is None:
            if self.status >= 500:
                raise Unreachable(f"server error {self.status}")
            return refusal(f"HTTP_{self.status}", self.body.decode(errors="replace")[:200], None, self.status)
        return refusal(env.error.code, env.error.message, env.error.details, self.status)

    def payload(self) -> Any:
        """The body as JSON builtins."""
        return msgspec.json.decode(self.body)

    def decode(self, result: type[R], command: bool) -> R:
        """The typed answer (a command's ``result``, or a read's whole body); raises its refusal."""
        refused = self.refusal()
        if refused is not None:
            raise refused
        raw = _envelope.decode(self.body).result if command else self.body
        if command and bytes(raw) == b"null":
            raw = msgspec.Raw(b"{}")
        return msgspec.json.decode(raw, type=result)


def _headers(target: Target) -> dict[str, str]:
    return {"authorization": f"Bearer {target.token}"} if target.token else {}


def _encode(command: msgspec.Struct | dict[str, Any]) -> bytes:
    return msgspec.json.encode(command)


class Client(Operations):
    """A synchronous client: ``Client().claim_issue(session_id=…, project=…, issue=…)``.

    The server and token are found as SPEC §7 says (``url``/``token``, the environment,
    the local data folder). Refusals raise ``eventcoord.errors.Refused`` subclasses.
    """

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.target = locate(url, token)
        self._http = httpx.Client(base_url=self.target.url, headers=_headers(self.target), timeout=timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def send(self, command: msgspec.Struct | dict[str, Any]) -> Reply:
        """POST one command; the answer unchanged (refusals included). Raises only Unreachable."""
        return self._call("POST", COMMANDS_PATH, content=_encode(command), headers=_JSON)

    def fetch(self, path: str, params: dict[str, Any] | None = None) -> Reply:
        """GET a read route; the answer unchanged. Raises only Unreachable."""
        return self._call("GET", path, params=params)

    def command(self, body: dict[str, Any]) -> Any:
        """Send an untyped command; its ``result`` as builtins, or raise its Refused."""
        reply = self.send(body)
        refused = reply.refusal()
        if refused is not None:
            raise refused
        return reply.payload().get("result")

    def get(self, path: str, **params: Any) -> Any:
        """GET any read route with query parameters; the body as builtins, or raise its Refused."""
        reply = self.fetch(path, {k: v for k, v in params.items() if v is not None})
        refused = reply.refusal()
        if refused is not None:
            raise refused
        return reply.payload()

    def events(self, after: int = 0, limit: int = 100) -> list[WireEvent]:
        """One page of the log."""
        return self.read_events(after=after, limit=limit).events

    def stream(self, after: int = 0) -> Iterator[WireEvent]:
        """Every event after ``after``, then live, over Server-Sent Events."""
        try:
            with self._http.stream("GET", "/v1/events/stream", params={"after": after}, timeout=None) as r:
                if r.status_code >= 400:
                    r.read()
                    raise Reply(r.status_code, r.content).refusal() or Unreachable(str(r.status_code))
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        yield _wire.decode(line[6:])
        except httpx.TransportError as e:
            raise Unreachable(f"{self.target.url}: {e}") from e

    def _call(self, method: str, path: str, **kwargs: Any) -> Reply:
        try:
            r = self._http.request(method, path, **kwargs)
        except httpx.TransportError as e:
            raise Unreachable(f"{self.target.url}: {e}") from e
        return Reply(r.status_code, r.content)

    def _command(self, command: msgspec.Struct, result: type[R]) -> R:
        return self.send(command).decode(result, command=True)

    def _read(self, name: str, query: msgspec.Struct, result: type[R]) -> R:
        path, params = read_request(BY_NAME[name], query)
        return self.fetch(path, params).decode(result, command=False)


class AsyncClient(AsyncOperations):
    """The asyncio twin of :class:`Client`: ``await AsyncClient().claim_issue(…)``."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.target = locate(url, token)
        self._http = httpx.AsyncClient(base_url=self.target.url, headers=_headers(self.target), timeout=timeout)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def send(self, command: msgspec.Struct | dict[str, Any]) -> Reply:
        """POST one command; the answer unchanged (refusals included). Raises only Unreachable."""
        return await self._call("POST", COMMANDS_PATH, content=_encode(command), headers=_JSON)

    async def fetch(self, path: str, params: dict[str, Any] | None = None) -> Reply:
        """GET a read route; the answer unchanged. Raises only Unreachable."""
        return await self._call("GET", path, params=params)

    async def command(self, body: dict[str, Any]) -> Any:
        """Send an untyped command; its ``result`` as builtins, or raise its Refused."""
        reply = await self.send(body)
        refused = reply.refusal()
        if refused is not None:
            raise refused
        return reply.payload().get("result")

    async def get(self, path: str, **params: Any) -> Any:
        """GET any read route with query parameters; the body as builtins, or raise its Refused."""
        reply = await self.fetch(path, {k: v for k, v in params.items() if v is not None})
        refused = reply.refusal()
        if refused is not None:
            raise refused
        return reply.payload()

    async def events(self, after: int = 0, limit: int = 100) -> list[WireEvent]:
        """One page of the log."""
        return (await self.read_events(after=after, limit=limit)).events

    async def stream(self, after: int = 0) -> AsyncIterator[WireEvent]:
        """Every event after ``after``, then live, over Server-Sent Events."""
        try:
            async with self._http.stream("GET", "/v1/events/stream", params={"after": after}, timeout=None) as r:
                if r.status_code >= 400:
                    await r.aread()
                    raise Reply(r.status_code, r.content).refusal() or Unreachable(str(r.status_code))
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        yield _wire.decode(line[6:])
        except httpx.TransportError as e:
            raise Unreachable(f"{self.target.url}: {e}") from e

    async def _call(self, method: str, path: str, **kwargs: Any) -> Reply:
        try:
            r = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as e:
            raise Unreachable(f"{self.target.url}: {e}") from e
        return Reply(r.status_code, r.content)

    async def _command(self, command: msgspec.Struct, result: type[R]) -> R:
        return (await self.send(command)).decode(result, command=True)

    async def _read(self, name: str, query: msgspec.Struct, result: type[R]) -> R:
        path, params = read_request(BY_NAME[name], query)
        return (await self.fetch(path, params)).decode(result, command=False)
