"""issue_token, decided without a database: who may mint a token for which workspace."""

from __future__ import annotations

import pytest

from eventcoord.commands import IssueToken
from eventcoord.context import Caller, Context
from eventcoord.domain.tokens import TokenState, decide_issue_token
from eventcoord.errors import DomainError

NOW = 1_800_000_000_000_000


def ctx(caller: Caller) -> Context:
    return Context(caller, NOW, 120)


def test_an_admin_mints_for_its_own_workspace_and_a_replay_never_shows_the_token() -> None:
    d = decide_issue_token(TokenState("ec_secret"), IssueToken(role="agent"), ctx(Caller("ws", "admin")))
    assert d.events == []
    assert d.result == {"token": "ec_secret", "workspace": "ws", "role": "agent"}
    assert d.replay_result == {"token": None, "workspace": "ws", "role": "agent", "replayed": True}


def test_only_the_operator_mints_for_another_workspace() -> None:
    with pytest.raises(DomainError) as e:
        decide_issue_token(TokenState("t"), IssueToken(role="reader", workspace="other"), ctx(Caller("ws", "admin")))
    assert e.value.code == "FORBIDDEN"
    d = decide_issue_token(TokenState("t"), IssueToken(role="reader", workspace="other"), ctx(Caller("default", "admin", operator=True)))
    assert d.result["workspace"] == "other"
