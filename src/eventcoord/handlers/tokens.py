"""Handlers of issue_token and revoke_token: the tokens table (credentials, never events)."""

from __future__ import annotations

from sqlalchemy import Connection, select, update

from eventcoord.auth import hash_token, new_token, store_token, token_id_of
from eventcoord.commands import IssueToken, RevokeToken
from eventcoord.context import Context, Decision
from eventcoord.domain import tokens as domain
from eventcoord.store.schema import tokens


def issue_token(conn: Connection, ctx: Context, cmd: IssueToken) -> Decision:
    token = new_token()
    d = domain.decide_issue_token(domain.TokenState(token, token_id_of(hash_token(token))), cmd, ctx)
    # The one write a handler makes itself: a credential belongs in the tokens table only.
    store_token(conn, token, d.result["workspace"], cmd.role, ctx.now_us)
    return d


def revoke_token(conn: Connection, ctx: Context, cmd: RevokeToken) -> Decision:
    row = conn.execute(
        select(tokens.c.token_id, tokens.c.workspace, tokens.c.role, tokens.c.revoked_us)
        .where(tokens.c.token_id == cmd.token_id)
        .with_for_update()
    ).first()
    state = domain.RevokeState(None if row is None else domain.TokenRow(*row))
    d = domain.decide_revoke_token(state, cmd, ctx)
    if state.row is not None and state.row.revoked_us is None:
        # Like issue_token's insert: the tokens table is the store's own, never an event.
        conn.execute(update(tokens).where(tokens.c.token_id == cmd.token_id).values(revoked_us=ctx.now_us))
    return d
