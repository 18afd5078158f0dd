"""``AsyncClient``: the typed client on asyncio (httpx), with Server-Sent Events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx
import msgspec

from eventcoord.client.generated import AsyncOperations
from eventcoord.client.locate import locate
from eventcoord.client.operations import BY_NAME, COMMANDS_PATH, read_request
from eventcoord.client.reply import JSON_BODY, WIRE_EVENT, Reply, auth_headers, encode
from eventcoord.codec import WireEvent
from eventcoord.errors import Unreachable

R = TypeVar("R")


class AsyncClient(AsyncOperations):
    """The asyncio twin of :class:`Client`: ``await AsyncClient().claim_issue(…)``."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.target = locate(url, token)
        # Certificates are loaded only for https (loading them costs ~0.1 s).
        verify = self.target.url.startswith("https:")
        self._http = httpx.AsyncClient(
            base_url=self.target.url, headers=auth_headers(self.target), timeout=timeout, verify=verify
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def send(self, command: msgspec.Struct | dict[str, Any]) -> Reply:
        """POST one command; the answer unchanged (refusals included). Raises only Unreachable."""
        return await self._call("POST", COMMANDS_PATH, content=encode(command), headers=JSON_BODY)

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

    async def stream(self, after: int = 0, types: Sequence[str] | None = None) -> AsyncIterator[WireEvent]:
        """Every event after ``after`` (only of ``types``, if given), then live, over Server-Sent Events."""
        params: dict[str, Any] = {"after": after}
        if types:
            params["type"] = list(types)
        try:
            async with self._http.stream("GET", "/v1/events/stream", params=params, timeout=None) as r:
                if r.status_code >= 400:
                    await r.aread()
                    raise Reply(r.status_code, r.content).refusal() or Unreachable(str(r.status_code))
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        yield WIRE_EVENT.decode(line[6:])
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
