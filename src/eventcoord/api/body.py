"""A command's body, read straight from the ASGI channel, at most ``MAX_BODY`` bytes.

``POST /v1/commands`` reads the one header it needs for this (``content-length``) with the
others it reads from the raw scope. Litestar's ``Request.body`` would build a ``Headers``
object of every header again to learn the length (~10 µs a command here), for the same
checks: an announced length over the limit is refused before anything is read, and so is
a body that streams past it.
"""

from __future__ import annotations

from typing import Any

from eventcoord import errors

#: The largest request body any route takes (``request_max_body_size`` for the others).
MAX_BODY = 1024 * 1024


async def read_body(receive: Any, content_length: bytes | None) -> bytes:
    """The request's body; 413 ``PAYLOAD_TOO_LARGE`` past ``MAX_BODY``, 422 ``VALIDATION``
    for a length that is not a number (the HTTP parser refuses most before) or a client gone."""
    if content_length is not None:
        try:
            announced = int(content_length)
        except ValueError:
            raise errors.invalid_request(f"invalid content-length: {content_length!r}") from None
        if announced > MAX_BODY:
            raise errors.payload_too_large()
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect: no one is left to answer
            raise errors.invalid_request("the client went away before its body arrived")
        chunk = message.get("body", b"")
        if chunk:
            total += len(chunk)
            if total > MAX_BODY:
                raise errors.payload_too_large()
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
