"""Messages, decided without a database."""

from __future__ import annotations

from typing import Any

import pytest

from eventcoord.commands import PostMessage
from eventcoord.context import Caller, Context, Decision
from eventcoord.domain import messages as domain
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError
from eventcoord.events import MessagePosted

NOW = 1_800_000_000_000_000
TTL = 120
ME = "s-me"
BOB = "s-bob"


def ctx(role: str = "agent") -> Context:
    return Context(Caller("default", role), NOW, TTL)  # type: ignore[arg-type]


def sess(sid: str) -> SessionState:
    return SessionState(sid, f"actor-{sid}", "agent", True, "explicit-override", None, NOW, None, None)


SESSIONS = {ME: sess(ME), BOB: sess(BOB)}


def of(d: Decision, cls: type[MessagePosted]) -> list[Any]:
    return [e for _, e in d.events if isinstance(e, cls)]


def test_post_message_sanitises_and_checks_agent_channels() -> None:
    d = domain.decide_post_message(
        domain.PostState(SESSIONS[ME], None),
        PostMessage(channel="issue:X-1", body="hi\x1b[31m\tthere\n", session_id=ME),
        ctx(),
    )
    (m,) = of(d, MessagePosted)
    assert m.body == "hi[31m\tthere\n" and m.session_id == ME and m.actor_key == f"actor-{ME}"
    with pytest.raises(DomainError) as e:
        domain.decide_post_message(
            domain.PostState(None, None), PostMessage(channel="agent:s-nobody", body="x"), ctx("admin")
        )
    assert e.value.code == "NOT_FOUND"
    ok = domain.decide_post_message(
        domain.PostState(None, SESSIONS[BOB]), PostMessage(channel=f"agent:{BOB}", body="x"), ctx("admin")
    )
    assert of(ok, MessagePosted)[0].actor_key == "token:admin"
    with pytest.raises(DomainError) as e:
        domain.decide_post_message(
            domain.PostState(None, None), PostMessage(channel="project:p", body="\x00\x01"), ctx()
        )
    assert e.value.code == "VALIDATION"
