"""An answer as the server sent it, and how clients decode it: a typed result or a Refused.

Shared by ``Client`` (``sync.py``, the standard library's http.client: the CLI starts fast)
and ``AsyncClient`` (``aio.py``, httpx).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from eventcoord.client.locate import Target
from eventcoord.codec import WireEvent
from eventcoord.errors import Refused, Unreachable, refusal

R = TypeVar("R")
WIRE_EVENT = msgspec.json.Decoder(WireEvent)
JSON_BODY = {"content-type": "application/json"}


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


def auth_headers(target: Target) -> dict[str, str]:
    """The Authorization header of ``target`` (none without a token: the server answers 401)."""
    return {"authorization": f"Bearer {target.token}"} if target.token else {}


def encode(command: msgspec.Struct | dict[str, Any]) -> bytes:
    """A command as its JSON body."""
    return msgspec.json.encode(command)
