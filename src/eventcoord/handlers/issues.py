"""Handlers of issue leases: load the claim's or release's state (``reads/issues.py``), decide.

A claim that asks to wait and is refused joins the issue's line as its second step.
"""

from __future__ import annotations

from sqlalchemy import Connection

from eventcoord.commands import ClaimIssue, ConfigureProject, ReleaseIssue, VerifyHold
from eventcoord.context import Context, Decision
from eventcoord.domain import issues as domain
from eventcoord.handlers.waits import join_line
from eventcoord.reads.common import load_session
from eventcoord.reads.issues import load_claim, load_issue_view, load_release


def claim_issue(conn: Connection, ctx: Context, cmd: ClaimIssue) -> Decision:
    decision = domain.decide_claim_issue(load_claim(conn, ctx, cmd), cmd, ctx)
    return join_line(conn, ctx, decision)  # with ``wait``, a refused claim joins the line


def release_issue(conn: Connection, ctx: Context, cmd: ReleaseIssue) -> Decision:
    return domain.decide_release_issue(load_release(conn, ctx, cmd), cmd, ctx)


def verify_hold(conn: Connection, ctx: Context, cmd: VerifyHold) -> Decision:
    state = domain.VerifyState(load_session(conn, ctx, cmd.session_id), load_issue_view(conn, ctx, cmd.issue))
    return domain.decide_verify_hold(state, cmd, ctx)


def configure_project(conn: Connection, ctx: Context, cmd: ConfigureProject) -> Decision:
    return domain.decide_configure_project(None, cmd, ctx)
