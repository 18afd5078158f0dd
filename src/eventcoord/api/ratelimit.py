"""Rate limits: per token, per client address, and a brake on repeated failed authentication.

An ASGI middleware in front of every route but ``/health``, with three kinds of token bucket
(a rate per second refilling up to a burst) in this process's memory: per client address,
before authentication; per bearer token as authentication reads it (:func:`eventcoord.auth.bearer_token`:
scheme case and spaces make no new token); and per address for failed authentications (each
401 takes one; while none is left, requests without a token authentication accepted
(:func:`vouch`) are refused unread). A refusal is 429 ``RATE_LIMITED`` with ``Retry-After``.
The limits: docs/reliability.md#rate-limits; why not Litestar's middleware:
docs/decisions/0010-our-own-rate-limiter.md.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from litestar.enums import ScopeType
from litestar.types import (
    ASGIApp,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    Message,
    Receive,
    Scope,
    Send,
)

from eventcoord import errors, metrics
from eventcoord.api.answers import error_body
from eventcoord.auth import bearer_token

#: Buckets kept per kind before idle (full) ones are forgotten.
MAX_KEYS = 50_000
#: Tokens remembered as good (they bypass the auth-failure brake).
MAX_GOOD = 10_000
#: Routes never limited (load balancers' health checks).
EXEMPT = frozenset({"/health"})
#: The scope key of a request's :class:`Verdict`.
VERDICT = "eventcoord.auth_verdict"


class Verdict:
    """Whether authentication accepted this request's token (set by :func:`vouch`)."""

    __slots__ = ("accepted",)

    def __init__(self) -> None:
        self.accepted = False


def vouch(scope: Scope) -> None:
    """Authentication accepted the request's bearer token: the limiter may trust it."""
    verdict = scope.get(VERDICT)
    if isinstance(verdict, Verdict):
        verdict.accepted = True


@dataclass(frozen=True, slots=True)
class Limit:
    """``rate`` per second, up to ``burst`` at once; a rate of 0 means no limit."""

    rate: float
    burst: float

    @property
    def on(self) -> bool:
        return self.rate > 0


class Buckets:
    """Token buckets of one kind, by key: ``take`` answers 0 (allowed) or the seconds to wait."""

    def __init__(self, limit: Limit) -> None:
        self.limit = limit
        self._state: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def _level(self, key: str, now: float) -> float:
        tokens, at = self._state.get(key, (self.limit.burst, now))
        return min(self.limit.burst, tokens + (now - at) * self.limit.rate)

    def take(self, key: str, now: float, cost: float = 1.0) -> float:
        """Take ``cost`` if there is that much; else the seconds until there will be."""
        level = self._level(key, now)
        if level < cost:
            return (cost - level) / self.limit.rate
        self._state[key] = (level - cost, now)
        if len(self._state) > MAX_KEYS:
            self._forget_idle(now)
        return 0.0

    def spend(self, key: str, now: float) -> None:
        """Take one whatever the level (down to zero): a failure happened anyway."""
        self._state[key] = (max(0.0, self._level(key, now) - 1.0), now)
        if len(self._state) > MAX_KEYS:
            self._forget_idle(now)

    def wait(self, key: str, now: float) -> float:
        """Seconds until one could be taken (0 if now), taking nothing."""
        level = self._level(key, now)
        return 0.0 if level >= 1.0 else (1.0 - level) / self.limit.rate

    def _forget_idle(self, now: float) -> None:
        full = [k for k in self._state if self._level(k, now) >= self.limit.burst]
        for k in full:
            del self._state[k]
        if len(self._state) > MAX_KEYS:  # still too many busy keys: forget the oldest half
            for k in sorted(self._state, key=lambda k: self._state[k][1])[: len(self._state) // 2]:
                del self._state[k]


@dataclass(frozen=True, slots=True)
class RateLimits:
    """The configured limits (``EVENTCOORD_RATE_*``; see :mod:`eventcoord.config`)."""

    token: Limit = Limit(100.0, 2000.0)
    address: Limit = Limit(1000.0, 4000.0)
    auth_failures: Limit = Limit(1.0, 20.0)

    @property
    def on(self) -> bool:
        return self.token.on or self.address.on or self.auth_failures.on


class Limiter:
    """The buckets of one server process, shared by every route."""

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits
        self.by_address = Buckets(limits.address)
        self.by_token = Buckets(limits.token)
        self.failures = Buckets(limits.auth_failures)
        self._good: OrderedDict[str, None] = OrderedDict()

    async def __call__(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Admit the request to ``app``, or answer 429 here."""
        if scope["type"] != ScopeType.HTTP or scope["path"] in EXEMPT:
            await app(scope, receive, send)
            return
        now = time.monotonic()
        client = scope.get("client")
        address = client[0] if client else "-"
        token = bearer_token(_authorization(scope))
        digest = hashlib.sha256(token.encode()).hexdigest() if token else ""
        if self.limits.address.on and (wait := self.by_address.take(address, now)):
            await _refuse(send, "address", wait)
            return
        known = digest in self._good
        if self.limits.auth_failures.on and not known and (wait := self.failures.wait(address, now)):
            await _refuse(send, "auth_failures", wait)
            return
        if digest and self.limits.token.on and (wait := self.by_token.take(digest, now)):
            await _refuse(send, "token", wait)
            return

        verdict = Verdict()
        scope[VERDICT] = verdict  # type: ignore[literal-required]

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                if message["status"] == 401:
                    if self.limits.auth_failures.on:
                        self.failures.spend(address, time.monotonic())
                    self._good.pop(digest, None)
                elif digest and not known and verdict.accepted:
                    self._good[digest] = None
                    if len(self._good) > MAX_GOOD:
                        self._good.popitem(last=False)
            await send(message)

        await app(scope, receive, watch)


def middleware(limits: RateLimits) -> Any:
    """A litestar middleware factory for ``limits``.

    Litestar builds a route's middleware stack per route, so the factory is called once
    per route: every wrapper it makes shares one :class:`Limiter`.
    """
    limiter = Limiter(limits)

    def factory(app: ASGIApp) -> ASGIApp:
        async def limited(scope: Scope, receive: Receive, send: Send) -> None:
            await limiter(app, scope, receive, send)

        return limited

    return factory


def _authorization(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            return bytes(value).decode("latin-1")
    return None


async def _refuse(send: Send, scope_name: str, wait: float) -> None:
    metrics.RATE_LIMITED.labels(scope_name).inc()
    retry = max(1, math.ceil(wait))
    what = {
        "address": "too many requests from this address",
        "token": "too many requests with this token",
        "auth_failures": "too many failed authentications from this address",
    }[scope_name]
    e = errors.rate_limited(f"{what}; retry after {retry} s")
    e.details.update({"scope": scope_name, "retry_after": round(wait, 3)})
    body = error_body(e)
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": 429,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(retry).encode()),
        ],
    }
    await send(start)
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": body, "more_body": False}
    await send(end)
