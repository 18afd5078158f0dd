"""Joining a waiting line, the second step of a command refused with ``wait``, and cancel_wait.

The line, the caller's wait and the wait-for graph are loaded by ``reads/waits.py``, under
the workspace's lock that serialises every join.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from eventcoord.commands import CancelWait
from eventcoord.context import Context, Decision
from eventcoord.domain import waits as domain
from eventcoord.domain.files import normalise_paths
from eventcoord.domain.paths import Work
from eventcoord.reads.common import load_session
from eventcoord.reads.waits import join_state, load_files_line, load_line, load_wait_of


def join_line(conn: Connection, ctx: Context, d: Decision, work: Work | None = None) -> Decision:
    """A handler's second step after a decision that asks to wait (``d.join``): lock the
    workspace, load the line (unless the decision saw it), the caller's wait and the graph,
    and join the line (``domain.waits.join``). Any other decision is returned as it is.
    Overlap checks spend ``work``, the command's (a claim_files spent some deciding)."""
    asked = d.join
    if asked is None:
        return d
    started = asked.started
    line: Sequence[domain.Waiter]
    if asked.line is not None:
        line = asked.line
    elif started.kind == "files":
        line = load_files_line(conn, ctx, started.paths, work)
    else:
        line = [w for w in load_line(conn, ctx, started.kind, started.key) if domain.waiter_live(w, ctx)]
    return domain.join(d, join_state(conn, ctx, started.session_id, line, asked.holders, work), ctx)


def cancel_wait(conn: Connection, ctx: Context, cmd: CancelWait) -> Decision:
    session = load_session(conn, ctx, cmd.session_id, lock=True)
    kind, key = domain.cancel_target(cmd)
    if cmd.paths is not None:
        normalise_paths(cmd.paths)  # 422 on an invalid path, like claim_files
    wait = load_wait_of(conn, ctx, cmd.session_id)
    if wait is not None and (wait.kind != kind or (wait.issue if kind == "files" else wait.key) != key):
        wait = None
    return domain.decide_cancel_wait(domain.CancelState(session, wait), cmd, ctx)
