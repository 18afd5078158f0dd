"""issue_token and revoke_token, decided without a database: who may mint or revoke a
token for which workspace; sessions bound to the token that registered them."""

from __future__ import annotations

import pytest

from eventcoord.auth import authorize, authorize_session, token_id_of
from eventcoord.commands import IssueToken, RevokeToken
from eventcoord.context import Caller, Context
from eventcoord.domain.tokens import (
    RevokeState,
    TokenRow,
    TokenState,
    decide_issue_token,
    decide_revoke_token,
)
from eventcoord.errors import DomainError

NOW = 1_800_000_000_000_000
TID = "tok_" + "a" * 24


def ctx(caller: Caller) -> Context:
    return Context(caller, NOW, 120)


def test_an_admin_mints_for_its_own_workspace_and_a_replay_never_shows_the_token() -> None:
    d = decide_issue_token(TokenState("ec_secret", TID), IssueToken(role="agent"), ctx(Caller("ws", "admin")))
    assert d.events == []
    assert d.result == {"token": "ec_secret", "token_id": TID, "workspace": "ws", "role": "agent"}
    assert d.replay_result == {"token": None, "token_id": TID, "workspace": "ws", "role": "agent", "replayed": True}


def test_only_the_operator_mints_for_another_workspace() -> None:
    with pytest.raises(DomainError) as e:
        decide_issue_token(
            TokenState("t", TID), IssueToken(role="reader", workspace="other"), ctx(Caller("ws", "admin"))
        )
    assert e.value.code == "FORBIDDEN"
    d = decide_issue_token(
        TokenState("t", TID),
        IssueToken(role="reader", workspace="other"),
        ctx(Caller("default", "admin", operator=True)),
    )
    assert d.result["workspace"] == "other"


def test_token_ids_are_stable_public_and_distinct() -> None:
    a, b = token_id_of("0" * 64), token_id_of("1" * 64)
    assert a == token_id_of("0" * 64) and a != b
    assert a.startswith("tok_") and len(a) == 28 and "0" * 24 not in a


def test_revoke_token_revokes_in_the_callers_workspace_only_and_is_idempotent() -> None:
    row = TokenRow(TID, "ws", "agent", None)
    d = decide_revoke_token(RevokeState(row), RevokeToken(token_id=TID), ctx(Caller("ws", "admin")))
    assert d.events == [] and d.result["revoked"] is True and d.result["already_revoked"] is False
    again = decide_revoke_token(
        RevokeState(TokenRow(TID, "ws", "agent", NOW)), RevokeToken(token_id=TID), ctx(Caller("ws", "admin"))
    )
    assert again.result["already_revoked"] is True
    for state in (RevokeState(None), RevokeState(TokenRow(TID, "other", "agent", None))):
        with pytest.raises(DomainError) as e:
            decide_revoke_token(state, RevokeToken(token_id=TID), ctx(Caller("ws", "admin")))
        assert e.value.code == "NOT_FOUND"  # another workspace's token is invisible
    d = decide_revoke_token(
        RevokeState(TokenRow(TID, "other", "agent", None)),
        RevokeToken(token_id=TID),
        ctx(Caller("default", "admin", operator=True)),
    )
    assert d.result["workspace"] == "other"


@pytest.mark.parametrize("role", ["human", "agent", "reader"])
def test_only_an_admin_may_revoke(role: str) -> None:
    with pytest.raises(DomainError) as e:
        authorize(Caller("ws", role, token_id=TID), RevokeToken(token_id=TID))  # type: ignore[arg-type]
    assert e.value.code == "FORBIDDEN"
    authorize(Caller("ws", "admin"), RevokeToken(token_id=TID))


def test_a_session_is_driven_only_by_its_token_or_an_admin() -> None:
    other = "tok_" + "b" * 24
    authorize_session(Caller("ws", "agent", token_id=TID), "s-1", TID)
    authorize_session(Caller("ws", "admin", token_id=other), "s-1", TID)
    authorize_session(Caller("ws", "agent", token_id=other), "s-1", None)  # registered before binding
    for role in ("agent", "human"):
        with pytest.raises(DomainError) as e:
            authorize_session(Caller("ws", role, token_id=other), "s-1", TID)  # type: ignore[arg-type]
        assert (e.value.code, e.value.status, e.value.details) == ("FORBIDDEN", 403, {"session_id": "s-1"})
