"""The table of contents of the write side: which handler decides which command.

A handler loads the state its decision needs (locking guard rows), calls the pure
decision, and returns a :class:`~eventcoord.context.Decision`; it never appends itself.
"""

from __future__ import annotations

from eventcoord import commands as c
from eventcoord.context import Handler
from eventcoord.handlers import admin, files, leases, queue, sessions

HANDLERS: dict[type[c.Command], Handler] = {
    c.RegisterAgent: sessions.register_agent,
    c.HeartbeatAgent: sessions.heartbeat_agent,
    c.EndAgent: sessions.end_agent,
    c.ConfigureProject: admin.configure_project,
    c.IssueToken: admin.issue_token,
    **leases.HANDLERS,
    **files.HANDLERS,
    **queue.HANDLERS,
}
