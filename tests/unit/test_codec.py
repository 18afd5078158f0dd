"""The one codec: command decoding names the offending field; event data round-trips."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventcoord.codec import (
    EventMetadata,
    decode_command,
    decode_event,
    encode,
    encode_event_data,
    event_type,
    format_time,
    parse_time,
)
from eventcoord.commands import COMMAND_TYPES, ClaimFiles, HeartbeatAgent, RegisterAgent
from eventcoord.errors import ValidationFailed
from eventcoord.events import EVENT_TYPES, AgentHeartbeat, Event, WorkEnqueued

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def field_of(body: bytes | str) -> str:
    with pytest.raises(ValidationFailed) as e:
        decode_command(body.encode() if isinstance(body, str) else body)
    assert e.value.code == "VALIDATION"
    assert e.value.status == 422
    field: str = e.value.details["field"]
    return field


# --- decode_command ---------------------------------------------------------------------


def test_decodes_each_foundation_command() -> None:
    assert decode_command(b'{"type":"register_agent","actor":"a"}') == RegisterAgent(actor="a")
    hb = decode_command(b'{"type":"heartbeat_agent","session_id":"s-1"}')
    assert isinstance(hb, HeartbeatAgent) and hb.working_on is msgspec.UNSET
    cleared = decode_command(b'{"type":"heartbeat_agent","session_id":"s-1","working_on":null}')
    assert isinstance(cleared, HeartbeatAgent) and cleared.working_on is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"type":"claim_files","issue":"I-1","paths":["a","b","c",4]}', "paths[3]"),
        ('{"type":"claim_files","issue":"I-1","paths":["a","b","c","' + "x" * 5000 + '"]}', "paths[3]"),
        ('{"type":"claim_files","issue":"I-1","paths":[]}', "paths"),
        ('{"type":"heartbeat_agent"}', "session_id"),
        ('{"type":"heartbeat_agent","session_id":"s","working_on":5}', "working_on"),
        ('{"type":"heartbeat_agent","session_id":"s","working_on":"bad key!"}', "working_on"),
        ('{"type":"heartbeat_agent","session_id":"has space"}', "session_id"),
        ('{"type":"register_agent","kind":"robot"}', "kind"),
        ('{"type":"register_agent","nonsense":1}', "nonsense"),
        ('{"type":"register_agent","command_id":""}', "command_id"),
        ('{"type":"register_agent","command_id":"' + "c" * 129 + '"}', "command_id"),
        ('{"type":"configure_project","project":"p","wip_limit":-1}', "wip_limit"),
        ('{"type":"configure_project","project":"p","wip_limit":"3"}', "wip_limit"),
        ('{"type":"issue_token","role":"god"}', "role"),
        ('{"type":"issue_token","role":"agent","workspace":"no spaces"}', "workspace"),
        ('{"type":"enqueue_work","project":"p","blocked_by":["ok","also-ok","bad key"]}', "blocked_by[2]"),
        ('{"type":"no_such_command"}', "type"),
        ('{"type":7}', "type"),
        ('{"session_id":"s"}', "type"),
    ],
)
def test_validation_names_the_field(body: str, field: str) -> None:
    assert field_of(body) == field


@pytest.mark.parametrize(
    "body", [b"", b"{", b'{"type":', b"nul", b"\xff\xfe", b'{"type":"register_agent"} x', b'"\\ud800"']
)
def test_malformed_json_is_a_validation_error_on_the_body(body: bytes) -> None:
    assert field_of(body) == "body"


@pytest.mark.parametrize("body", [b"[]", b"null", b"1", b'"register_agent"', b"true"])
def test_a_body_that_is_not_an_object_is_a_validation_error_on_the_body(body: bytes) -> None:
    assert field_of(body) == "body"


DEEP = b"[" * 2000 + b"]" * 2000


@pytest.mark.parametrize(
    "body",
    [
        b'{"x":' + DEEP + b',"type":"register_agent"}',  # before the tag: skipped while looking for it
        b'{"type":"enqueue_work","project":"P","payload":' + DEEP + b"}",  # an Any field
    ],
    ids=["before-the-tag", "any-field"],
)
def test_deeply_nested_json_is_a_validation_error(body: bytes) -> None:
    assert field_of(body) in ("body", "x", "payload")


@given(json_values)
def test_any_json_value_decodes_or_fails_with_validation(value: Any) -> None:
    try:
        cmd = decode_command(json.dumps(value).encode())
    except ValidationFailed as e:
        assert e.code == "VALIDATION"
        assert isinstance(e.details["field"], str) and e.details["field"]
    else:
        assert type(cmd) in COMMAND_TYPES.values()


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_fail_with_validation(body: bytes) -> None:
    try:
        decode_command(body)
    except ValidationFailed as e:
        assert e.details["field"]


@given(st.sampled_from(sorted(COMMAND_TYPES)), st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True), json_values)
def test_an_unknown_field_is_named(tag: str, name: str, value: Any) -> None:
    known = {f.name for f in msgspec.structs.fields(COMMAND_TYPES[tag])}
    if name in known or name == "type":
        return
    # Unknown fields are refused as they are met: before any required field is missed.
    assert field_of(json.dumps({"type": tag, name: value})) == name


def test_command_types_are_the_stable_tags() -> None:
    for tag, cls in COMMAND_TYPES.items():
        assert cls.__struct_config__.tag == tag
    assert {"register_agent", "heartbeat_agent", "end_agent", "configure_project", "issue_token"} <= set(COMMAND_TYPES)


def test_claim_files_decodes_paths_verbatim() -> None:
    cmd = decode_command(b'{"type":"claim_files","issue":"I-1","paths":["./src//a.py","docs/"]}')
    assert isinstance(cmd, ClaimFiles) and cmd.paths == ["./src//a.py", "docs/"]


# --- events -----------------------------------------------------------------------------

small_ints = st.integers(-(2**63), 2**63 - 1)


def event_strategy(cls: type[Event]) -> st.SearchStrategy[Event]:
    overrides: dict[str, Any] = {
        f.name: small_ints for f in msgspec.structs.fields(cls) if f.type is int or f.type == (int | None)
    }
    if cls is WorkEnqueued:
        overrides["payload"] = json_values
    return st.builds(cls, **overrides) if overrides else st.from_type(cls)


any_event = st.one_of([event_strategy(cls) for cls in EVENT_TYPES.values()])


@given(any_event)
def test_event_data_round_trips(event: Event) -> None:
    tag = event_type(event)
    data = encode_event_data(event)
    as_json = json.loads(data)
    assert isinstance(as_json, dict)
    assert "type" not in as_json  # the tag is stored as the event's type, not in its data
    assert decode_event(tag, data) == event
    assert decode_event(tag, data.decode()) == event


def test_every_event_has_an_explicit_stable_tag_equal_to_its_name() -> None:
    for tag, cls in EVENT_TYPES.items():
        assert cls.__struct_config__.tag == tag == cls.__name__


def test_heartbeat_without_working_on_round_trips_as_absent() -> None:
    data = encode_event_data(AgentHeartbeat(session_id="s"))
    assert json.loads(data) == {"session_id": "s"}
    assert decode_event("AgentHeartbeat", data).working_on is msgspec.UNSET  # type: ignore[attr-defined]
    cleared = encode_event_data(AgentHeartbeat(session_id="s", working_on=None))
    assert decode_event("AgentHeartbeat", cleared).working_on is None  # type: ignore[attr-defined]


def test_metadata_omits_absent_members() -> None:
    assert json.loads(encode(EventMetadata(workspace="w"))) == {"workspace": "w"}
    full = EventMetadata(
        workspace="w", actor_key="a", session_id="s", command_id="c", correlation_id="r", causation_id="c"
    )
    assert msgspec.json.decode(encode(full), type=EventMetadata) == full


@given(st.integers(0, 4_102_444_800_000_000))
def test_time_formats_exactly_in_rfc3339_utc(us: int) -> None:
    exact = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)
    assert format_time(us) == exact.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@given(st.integers(0, 4_102_444_800_000_000))
def test_time_round_trips_exactly(us: int) -> None:
    assert parse_time(format_time(us)) == us


@pytest.mark.parametrize("us", [0, 511, 1_089_601_258_828_981, 1_800_000_000_123_456])
def test_time_round_trips_exactly_at_known_float_traps(us: int) -> None:
    assert parse_time(format_time(us)) == us


def test_naive_or_offset_times_parse_as_utc() -> None:
    assert parse_time("2026-01-02T03:04:05.000006") == parse_time("2026-01-02T03:04:05.000006Z")
    assert parse_time("2026-01-02T05:04:05.000006+02:00") == parse_time("2026-01-02T03:04:05.000006Z")
