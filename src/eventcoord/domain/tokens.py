"""issue_token and revoke_token: who may mint or revoke a bearer token. Pure, no I/O.

Tokens are credentials, not coordination facts: the handler stores them hashed, never in
the log, and a replay of the command under the same ``command_id`` never shows one again.
A token is named publicly by its ``token_id``; revoking it appends nothing (the tokens
table is the store's own) and is idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventcoord import errors
from eventcoord.commands import IssueToken, RevokeToken
from eventcoord.context import Context, Decision


@dataclass(frozen=True, slots=True)
class TokenState:
    """The freshly minted token the decision hands out (minted by the handler), and its id."""

    token: str
    token_id: str


@dataclass(frozen=True, slots=True)
class TokenRow:
    """A stored token as revoke_token sees it (never the secret)."""

    token_id: str
    workspace: str
    role: str
    revoked_us: int | None


@dataclass(frozen=True, slots=True)
class RevokeState:
    """The token revoke_token names, locked (None when no such token exists)."""

    row: TokenRow | None


def decide_issue_token(state: TokenState, cmd: IssueToken, ctx: Context) -> Decision:
    """An admin mints tokens for its workspace; only the operator for another one."""
    workspace = cmd.workspace or ctx.workspace
    if workspace != ctx.workspace and not ctx.caller.operator:
        raise errors.forbidden("only the operator's token may issue tokens for another workspace")
    result = {"token": state.token, "token_id": state.token_id, "workspace": workspace, "role": cmd.role}
    # A retry under the same command_id must not mint a second credential, and the stored
    # answer must not hold one in clear: replays answer without the token.
    return Decision(result=result, replay_result={**result, "token": None, "replayed": True})


def decide_revoke_token(state: RevokeState, cmd: RevokeToken, ctx: Context) -> Decision:
    """An admin revokes a token of its workspace (the operator: of any); a token of another
    workspace is invisible (404). Revoking a revoked token answers the same, changing nothing."""
    row = state.row
    if row is None or (row.workspace != ctx.workspace and not ctx.caller.operator):
        raise errors.token_not_found(cmd.token_id)
    already = row.revoked_us is not None
    return Decision(
        result={
            "token_id": row.token_id,
            "workspace": row.workspace,
            "role": row.role,
            "revoked": True,
            "already_revoked": already,
        }
    )
