"""Handlers of the session commands: load the session (and what it holds, ``reads/sessions.py``), decide."""

from __future__ import annotations

from sqlalchemy import Connection

from eventcoord.commands import EndAgent, HeartbeatAgent, RegisterAgent
from eventcoord.context import Context, Decision
from eventcoord.domain import ending
from eventcoord.domain import sessions as domain
from eventcoord.reads.common import load_session
from eventcoord.reads.sessions import freed_by, held_issues, load_holdings


def register_agent(conn: Connection, ctx: Context, cmd: RegisterAgent) -> Decision:
    return domain.decide_register_agent(None, cmd, ctx)


def heartbeat_agent(conn: Connection, ctx: Context, cmd: HeartbeatAgent) -> Decision:
    session = load_session(conn, ctx, cmd.session_id, lock=True)
    held = held_issues(conn, cmd.session_id) if cmd.handoff_note else []
    return domain.decide_heartbeat_agent(domain.HeartbeatState(session, held), cmd, ctx)


def end_agent(conn: Connection, ctx: Context, cmd: EndAgent) -> Decision:
    """End a session: load it and everything it holds (locked), the lines it frees, decide."""
    session = load_session(conn, ctx, cmd.session_id, lock=True)
    if session is None or session.ended_us is not None:
        return ending.decide_end_agent(ending.EndState(session, ending.Holdings([], {}, [], [])), cmd, ctx)
    holdings = load_holdings(conn, ctx, cmd.session_id)
    freed = freed_by(conn, ctx, cmd.session_id, holdings)
    return ending.decide_end_agent(ending.EndState(session, holdings, freed), cmd, ctx)
