"""Givens shared by the queue and named-lease unit tests: a fixed clock, sessions, refusals."""

from __future__ import annotations

from typing import Any

import pytest

from eventcoord.context import Caller, Context
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError

NOW = 1_800_000_000_000_000
TTL = 10
SECOND = 1_000_000


def ctx(now_us: int = NOW, role: str = "agent") -> Context:
    return Context(Caller("default", role), now_us, TTL)  # type: ignore[arg-type]


def session(sid: str = "s-a", *, kind: str = "agent", last_seen_us: int = NOW, ended_us: int | None = None) -> SessionState:
    return SessionState(sid, f"actor-{sid}", kind, True, "explicit-override", "host-1", last_seen_us, ended_us, None)


def code_of(fn: Any, *args: Any) -> tuple[str, dict[str, Any]]:
    """The code and details of the refusal ``fn(*args)`` raises."""
    with pytest.raises(DomainError) as e:
        fn(*args)
    return e.value.code, e.value.details
