"""A command's body read from the ASGI channel (``api.body.read_body``): the checks Litestar's
``Request.body`` made, kept (413 past the limit, announced or streamed)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from eventcoord.api.body import MAX_BODY, read_body
from eventcoord.errors import DomainError


def _channel(*chunks: bytes, disconnect: bool = False) -> Callable[[], Awaitable[dict[str, Any]]]:
    last = len(chunks) - 1
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": c, "more_body": i < last or disconnect} for i, c in enumerate(chunks)
    ]
    if disconnect:
        messages.append({"type": "http.disconnect"})

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    return receive


def _read(receive: Callable[[], Awaitable[dict[str, Any]]], length: bytes | None = None) -> bytes:
    return asyncio.run(read_body(receive, length))


def test_chunks_are_joined_up_to_the_limit() -> None:
    assert _read(_channel(b'{"type":', b'"x"}')) == b'{"type":"x"}'
    assert _read(_channel(b"a" * MAX_BODY), str(MAX_BODY).encode()) == b"a" * MAX_BODY
    assert _read(_channel(b"")) == b""


@pytest.mark.parametrize(
    ("receive", "length", "code"),
    [
        (_channel(b"{}"), str(MAX_BODY + 1).encode(), "PAYLOAD_TOO_LARGE"),  # announced: refused unread
        (_channel(b"a" * MAX_BODY, b"a"), None, "PAYLOAD_TOO_LARGE"),  # streamed past the limit
        (_channel(b"{}"), b"12x", "VALIDATION"),
        (_channel(b"{", disconnect=True), None, "VALIDATION"),
    ],
)
def test_a_body_past_the_limit_or_cut_short_is_refused(receive: Any, length: bytes | None, code: str) -> None:
    with pytest.raises(DomainError) as refused:
        _read(receive, length)
    assert refused.value.code == code
