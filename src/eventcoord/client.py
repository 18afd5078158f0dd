"""A typed Python client of the HTTP API, with live subscriptions (SSE or NATS).

    async with Client("http://127.0.0.1:8765", token) as ec:
        sid = (await ec.command({"type": "register_agent", "actor": "me"}))["session_id"]
        async for ev in ec.stream(after=0):          # Server-Sent Events, no NATS needed
            ...
    async for ev in subscribe("nats://127.0.0.1:4222", workspace="default"):  # JetStream
        ...
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import httpx
import msgspec

from eventcoord.codec import WireEvent
from eventcoord.errors import DomainError
from eventcoord.subscriber import subscribe

__all__ = ["Client", "subscribe"]

_wire = msgspec.json.Decoder(WireEvent)


class Client:
    """Commands and reads over HTTP; refusals raise DomainError with the stable code."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, headers={"authorization": f"Bearer {token}"}, timeout=timeout)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def command(self, body: dict[str, Any]) -> Any:
        """Send one command; returns its ``result`` or raises DomainError(code, …)."""
        r = await self._http.post("/v1/commands", content=msgspec.json.encode(body), headers={"content-type": "application/json"})
        payload = r.json()
        if not payload.get("ok"):
            err = payload.get("error", {})
            raise DomainError(err.get("code", "ERROR"), err.get("message", r.text), err.get("details"))
        return payload.get("result")

    async def get(self, path: str, **params: Any) -> Any:
        """GET a read route; raises DomainError on an error envelope."""
        r = await self._http.get(path, params={k: v for k, v in params.items() if v is not None})
        payload = r.json()
        if r.status_code >= 400:
            err = payload.get("error", {})
            raise DomainError(err.get("code", "ERROR"), err.get("message", r.text), err.get("details"))
        return payload

    async def events(self, after: int = 0, limit: int = 100) -> list[WireEvent]:
        """One page of the log."""
        r = await self._http.get("/v1/events", params={"after": after, "limit": limit})
        r.raise_for_status()
        return [_wire.decode(msgspec.json.encode(e)) for e in r.json()["events"]]

    async def stream(self, after: int = 0) -> AsyncIterator[WireEvent]:
        """Every event after ``after``, then live, over Server-Sent Events."""
        async with self._http.stream("GET", "/v1/events/stream", params={"after": after}, timeout=None) as r:
            r.raise_for_status()
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    yield _wire.decode(line[6:])
