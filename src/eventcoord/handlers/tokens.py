"""Handler of issue_token: mint a token, decide, store it hashed (never an event)."""

from __future__ import annotations

from sqlalchemy import Connection

from eventcoord.auth import new_token, store_token
from eventcoord.commands import IssueToken
from eventcoord.context import Context, Decision
from eventcoord.domain import tokens as domain


def issue_token(conn: Connection, ctx: Context, cmd: IssueToken) -> Decision:
    token = new_token()
    d = domain.decide_issue_token(domain.TokenState(token), cmd, ctx)
    # The one write a handler makes itself: a credential belongs in the tokens table only.
    store_token(conn, token, d.result["workspace"], cmd.role, ctx.now_us)
    return d
