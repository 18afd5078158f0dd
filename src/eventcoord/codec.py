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

_command_decoder = msgspec.json.Decoder(AnyCommand)
_encoder = msgspec.json.Encoder()
_event_decoders = {tag: msgspec.json.Decoder(cls) for tag, cls in EVENT_TYPES.items()}
_FIELD_AT = re.compile(r"- at `\$\.?(?P<path>[^`]*)`$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MISSING = re.compile(r"missing required field `(?P<name>[^`]+)`")
_UNKNOWN = re.compile(r"unknown field `(?P<name>[^`]+)`")


class EventMetadata(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Who and what caused an event; stored beside it and sent on the wire."""

    workspace: str
    actor_key: str | None = None
    session_id: str | None = None
    command_id: str | None = None
    correlation_id: str | None = None
    causation_id: str | None = None


class WireEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event as the log, Server-Sent Events and NATS carry it (SPEC §2)."""

    position: int
    stream: str
    version: int
    type: str
    data: msgspec.Raw
    metadata: msgspec.Raw
    recorded_at: str


def decode_command(body: bytes) -> AnyCommand:
    """Decode a command body; any problem is a 422 VALIDATION naming the field."""
    try:
        return _command_decoder.decode(body)
    except msgspec.ValidationError as e:
        raise errors.invalid(field_of(str(e)), str(e)) from None
    except msgspec.DecodeError as e:
        raise errors.invalid("body", f"malformed JSON: {e}") from None
    except RecursionError:
        raise errors.invalid("body", "JSON nested too deeply") from None


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
