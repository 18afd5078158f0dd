"""Handler of issue_token: a credential stored hashed, never an event."""

from __future__ import annotations

from sqlalchemy import Connection

from eventcoord.auth import new_token, store_token
from eventcoord.commands import IssueToken
from eventcoord.context import Context, Decision
from eventcoord.errors import DomainError


def issue_token(conn: Connection, ctx: Context, cmd: IssueToken) -> Decision:
    """Tokens are credentials, not coordination facts: stored hashed, never in the log."""
    workspace = cmd.workspace or ctx.workspace
    if workspace != ctx.workspace and not ctx.caller.operator:
        raise DomainError("FORBIDDEN", "only the operator's token may issue tokens for another workspace")
    token = new_token()
    store_token(conn, token, workspace, cmd.role, ctx.now_us)
    result = {"token": token, "workspace": workspace, "role": cmd.role}
    # A retry under the same command_id must not mint a second credential, and the stored
    # answer must not hold one in clear: replays answer without the token.
    return Decision(result=result, replay_result={**result, "token": None, "replayed": True})
