"""Names that are keys match as whole strings; workspaces map to NATS subjects injectively
(docs/protocol.md#names)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventcoord.codec import decode_command
from eventcoord.errors import ValidationFailed
from eventcoord.outbox.jetstream import subject_token, token_name
from eventcoord.sanitize import is_channel, is_key, is_workspace

BODIES = [
    ('{"type":"claim_issue","session_id":"s","project":"P","issue":"NL-1\\n"}', "issue"),
    ('{"type":"claim_issue","session_id":"s","project":"P\\n","issue":"NL-1"}', "project"),
    ('{"type":"claim_issue","session_id":"s\\n","project":"P","issue":"NL-1"}', "session_id"),
    ('{"type":"register_agent","command_id":"c-1\\n"}', "command_id"),
    ('{"type":"acquire_lease","session_id":"s","name":"leader\\n"}', "name"),
    ('{"type":"post_message","channel":"issue:NL-1\\n","body":"b"}', "channel"),
    ('{"type":"issue_token","role":"agent","workspace":"evil\\n"}', "workspace"),
    ('{"type":"enqueue_work","project":"P","blocked_by":["w-1\\n"]}', "blocked_by[0]"),
    ('{"type":"start_work","session_id":"s","item_id":"w-1\\n"}', "item_id"),
]


@pytest.mark.parametrize(("body", "field"), BODIES)
def test_a_trailing_newline_is_refused_on_every_name(body: str, field: str) -> None:
    with pytest.raises(ValidationFailed) as e:
        decode_command(body.encode())
    assert e.value.details["field"] == field
    decode_command(body.replace("\\n", "").encode())  # the same name without it is fine


def test_name_checks_match_whole_strings() -> None:
    assert is_key("NL-1") and not is_key("NL-1\n") and not is_key("NL-1\r")
    assert is_workspace("evil_") and not is_workspace("evil\n") and not is_workspace("")
    assert is_channel("issue:NL-1") and not is_channel("issue:NL-1\n")


def test_valid_workspace_names_are_their_own_subject_token() -> None:
    for ws in ("default", "evil_", "a-b_C9", "_"):
        assert subject_token(ws) == ws
    assert subject_token("evil\n") != subject_token("evil_")
    assert subject_token("evil\n") == "evil%0A"


@given(st.text(max_size=20), st.text(max_size=20))
def test_the_subject_mapping_is_injective_and_token_safe(a: str, b: str) -> None:
    ta, tb = subject_token(a), subject_token(b)
    assert token_name(ta) == a
    assert (ta == tb) == (a == b)
    assert ta and not any(c in ta for c in ". *>\t\r\n\x00")
