"""What the rate limiter costs per request, in process.

Calls the limiter (:class:`eventcoord.api.ratelimit.Limiter`, limits set so nothing is
refused) in front of a trivial ASGI app ``--requests`` times over 256 tokens from one
address, then the app alone, and prints the difference per request.

    .venv/bin/python bench/ratelimit_overhead.py
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from eventcoord.api.ratelimit import Limit, Limiter, RateLimits


async def app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def send(message: Any) -> None:
    return None


async def receive() -> Any:
    return {}


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--requests", type=int, default=200_000)
    n = p.parse_args().requests
    limiter = Limiter(RateLimits(token=Limit(1e9, 1e9), address=Limit(1e9, 1e9), auth_failures=Limit(1.0, 20.0)))
    scopes = [
        {
            "type": "http",
            "path": "/v1/commands",
            "client": ("127.0.0.1", 40000),
            "headers": [(b"authorization", f"Bearer token-{i}".encode()), (b"content-type", b"application/json")],
        }
        for i in range(256)
    ]
    started = time.perf_counter()
    for i in range(n):
        await limiter(app, scopes[i % 256], receive, send)
    limited = (time.perf_counter() - started) / n
    started = time.perf_counter()
    for i in range(n):
        await app(scopes[i % 256], receive, send)
    bare = (time.perf_counter() - started) / n
    print(f"rate limiter overhead: {(limited - bare) * 1e6:.2f} µs per request ({n} requests, 256 tokens, one address)")


if __name__ == "__main__":
    asyncio.run(main())
