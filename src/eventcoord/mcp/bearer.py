"""The bearer tokens of MCP over HTTP: each client presents its own eventcoord token.

The MCP server lends nothing (docs/protocol.md#under-attack): a request without a token
eventcoord accepts is 401, and a client's tools run as the token it presented. A token is
checked by asking eventcoord for a read that costs nothing; an acceptance is trusted for
:data:`CACHE_SECONDS`. While eventcoord cannot answer, a token is taken as presented and not
remembered: each tool call is authenticated by eventcoord itself, so this lends no power.
"""

from __future__ import annotations

import time

import httpx
from mcp.server.auth.provider import AccessToken

from eventcoord.auth import hash_token, token_id_of

#: How long an acceptance by eventcoord is trusted (eventcoord's own lookup cache is shorter).
CACHE_SECONDS = 1.0
#: The read that costs nothing: the log after the last position there can be.
_PROBE = ("/v1/events", {"after": 2**63 - 1, "limit": 1})


class EventcoordTokens:
    """A ``TokenVerifier`` (MCP SDK) that asks eventcoord whether it accepts a token."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self._http = httpx.AsyncClient(base_url=url, timeout=timeout, verify=url.startswith("https:"))
        self._good: dict[str, float] = {}  # token -> trusted until (monotonic)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's access (its principal is eventcoord's ``token_id``), or None: 401."""
        # The SDK cuts "Bearer " and keeps the rest: spaces around the token are not part of it.
        token = token.strip()
        if not token or not token.isascii():
            return None
        now = time.monotonic()
        if self._good.get(token, 0.0) > now:
            return _access(token)
        path, params = _PROBE
        try:
            r = await self._http.get(path, params=params, headers={"authorization": f"Bearer {token}"})
        except httpx.HTTPError:
            return _access(token)  # eventcoord is away: every tool call will say so
        if r.status_code == 401:
            self._good.pop(token, None)
            return None
        if r.status_code == 200:
            if len(self._good) > 10_000:
                self._good.clear()
            self._good[token] = now + CACHE_SECONDS
        return _access(token)  # 429 or 5xx: not a judgement of the token


def _access(token: str) -> AccessToken:
    # The SDK binds an MCP session to the principal that opened it: another token
    # naming that session is answered as if it did not exist.
    tid = token_id_of(hash_token(token))
    return AccessToken(token=token, client_id=tid, subject=tid, scopes=[])
