"""issue_token: who may mint a bearer token for which workspace. Pure, no I/O.

Tokens are credentials, not coordination facts: the handler stores them hashed, never in
the log, and a replay of the command under the same ``command_id`` never shows one again.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventcoord import errors
from eventcoord.commands import IssueToken
from eventcoord.context import Context, Decision


@dataclass(frozen=True, slots=True)
class TokenState:
    """The freshly minted token the decision hands out (minted by the handler)."""

    token: str


def decide_issue_token(state: TokenState, cmd: IssueToken, ctx: Context) -> Decision:
    """An admin mints tokens for its workspace; only the operator for another one."""
    workspace = cmd.workspace or ctx.workspace
    if workspace != ctx.workspace and not ctx.caller.operator:
        raise errors.forbidden("only the operator's token may issue tokens for another workspace")
    result = {"token": state.token, "workspace": workspace, "role": cmd.role}
    # A retry under the same command_id must not mint a second credential, and the stored
    # answer must not hold one in clear: replays answer without the token.
    return Decision(result=result, replay_result={**result, "token": None, "replayed": True})
