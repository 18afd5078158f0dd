"""The one codec: commands in, events to and from the store, events on the wire.

One Encoder/Decoder per type, built once and reused (msgspec is fastest that way).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from eventcoord import errors
from eventcoord.commands import AnyCommand
from eventcoord.events import EVENT_TYPES, Event
from eventcoord.sanitize import (
    CHANNEL_PATTERN,
    COMMAND_ID_PATTERN,
    KEY_PATTERN,
    TOKEN_ID_PATTERN,
    WORKSPACE_PATTERN,
)

_command_decoder = msgspec.json.Decoder(AnyCommand)
_encoder = msgspec.json.Encoder()
_event_decoders = {tag: msgspec.json.Decoder(cls) for tag, cls in EVENT_TYPES.items()}
_FIELD_AT = re.compile(r"- at `\$\.?(?P<path>[^`]*)`$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MISSING = re.compile(r"missing required field `(?P<name>[^`]+)`")
_UNKNOWN = re.compile(r"unknown field `(?P<name>[^`]+)`")
_KEY_WORDS = "1 to 128 letters, digits and . _ : / # -, starting with a letter or a digit"
#: What each name pattern allows, in words (a client reads these, not regular expressions).
_PATTERN_WORDS = {
    KEY_PATTERN: _KEY_WORDS,
    WORKSPACE_PATTERN: "1 to 64 letters, digits, _ and -",
    CHANNEL_PATTERN: f"issue:<key>, agent:<session id> or project:<key>, where a key is {_KEY_WORDS}",
    COMMAND_ID_PATTERN: "any characters but control characters",
    TOKEN_ID_PATTERN: "tok_ and 24 lowercase hexadecimal digits",
}
_REGEX = re.compile(r"Expected `str` matching regex '.*' - at")
_LENGTH = re.compile(r"Expected `(?P<type>str|array|object)` of length (?P<op>>=|<=) (?P<n>\d+)")


class EventMetadata(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Who and what caused an event; stored beside it and sent on the wire."""

    workspace: str
    actor_key: str | None = None
    session_id: str | None = None
    command_id: str | None = None
    correlation_id: str | None = None
    causation_id: str | None = None


class WireEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An event as the log, Server-Sent Events and NATS carry it (docs/protocol.md#events).

    ``hash`` links it into the log's hash chain (docs/protocol.md#the-hash-chain): present in
    ``/v1/events`` and exports, absent where an event travels as it commits (SSE, NATS),
    before it is chained.
    """

    position: int
    stream: str
    version: int
    type: str
    data: msgspec.Raw
    metadata: msgspec.Raw
    recorded_at: str
    hash: str | None = None


def decode_command(body: bytes) -> AnyCommand:
    """Decode a command body; any problem is a 422 VALIDATION naming the field."""
    try:
        return _command_decoder.decode(body)
    except msgspec.ValidationError as e:
        raise errors.invalid(field_of(str(e)), in_words(str(e))) from None
    except msgspec.DecodeError as e:
        raise errors.invalid("body", f"malformed JSON: {e}") from None
    except RecursionError:
        raise errors.invalid("body", "JSON nested too deeply") from None


def in_words(message: str) -> str:
    """msgspec's validation message, with what a name or a length allows said in words.

    ``Expected `str` matching regex '^[A-Za-z0-9]…' - at `$.issue``` becomes ``issue: 1 to
    128 letters, digits and . _ : / # -, starting with a letter or a digit (and nothing
    after them, not even a newline)``; other messages are kept as they are.
    """
    field = field_of(message)
    for pattern, words in _PATTERN_WORDS.items():
        if f"matching regex {pattern!r}" in message:
            return f"{field}: expected {words}, and nothing after it (not even a newline)"
    if _REGEX.search(message):
        return f"{field}: not a valid value"
    m = _LENGTH.search(message)
    if m is not None:
        unit = "characters" if m["type"] == "str" else "items"
        n = int(m["n"])
        if m["op"] == ">=":
            return f"{field}: must not be empty" if n == 1 else f"{field}: at least {n} {unit}"
        return f"{field}: at most {n} {unit}"
    return message


def field_of(message: str) -> str:
    """Turn msgspec's ``- at `$.paths[3]``` suffix into ``paths[3]``."""
    path = ""
    m = _FIELD_AT.search(message)
    if m:
        path = m.group("path")
    for pattern in (_MISSING, _UNKNOWN):
        n = pattern.search(message)
        if n:
            path = f"{path}.{n.group('name')}" if path else n.group("name")
    return path or "body"


def encode(value: Any) -> bytes:
    """Encode any msgspec-supported value as JSON."""
    return _encoder.encode(value)


def encode_event_data(event: Event) -> bytes:
    """The event's ``data``: its fields without the tag (the tag is stored as ``type``)."""
    raw = _encoder.encode(event)
    # msgspec always writes the tag first: {"type":"X",...}; drop that member.
    comma = raw.find(b",", 9)
    if comma == -1:  # an event without fields
        return b"{}"
    return b"{" + raw[comma + 1 :]


#: Upcasters (docs/events.md): when an event's stored shape changes in a way a new field
#: with a default cannot express (a rename, a split), the type maps here to a function from
#: the old stored ``data`` (a dict) to today's; stored rows are never rewritten.
UPCASTERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def decode_event(event_type: str, data: bytes | str) -> Event:
    """Rebuild a domain event from its stored type and data (upcast first, if it has to be)."""
    up = UPCASTERS.get(event_type)
    if up is not None:
        return _event_decoders[event_type].decode(_encoder.encode(up(msgspec.json.decode(data))))
    return _event_decoders[event_type].decode(data)


def event_type(event: Event) -> str:
    """The stable tag of an event."""
    return event.__struct_config__.tag  # type: ignore[return-value]


_day_prefix: tuple[int, str] = (-1, "")


def format_time(us: int) -> str:
    """Microseconds since the epoch as RFC 3339 UTC (``2026-11-30T05:20:39.123456Z``)."""
    global _day_prefix
    seconds, micros = divmod(us, 1_000_000)
    day, second = divmod(seconds, 86_400)
    cached = _day_prefix
    if cached[0] != day:  # the calendar once per day, not once per call: a page's times vary
        cached = _day_prefix = (day, (_EPOCH + timedelta(days=day)).strftime("%Y-%m-%d"))
    hour, rest = divmod(second, 3600)
    return f"{cached[1]}T{hour:02d}:{rest // 60:02d}:{rest % 60:02d}.{micros:06d}Z"


def parse_time(value: str) -> int:
    """RFC 3339 (or ISO 8601) text to microseconds since the epoch; naive means UTC."""
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    # Integer arithmetic: a float timestamp would lose the last microsecond.
    return (dt - _EPOCH) // timedelta(microseconds=1)
