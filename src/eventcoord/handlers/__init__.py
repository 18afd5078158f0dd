"""The table of contents of the write side: which handler decides which command.

A handler loads the state its decision needs (locking guard rows), calls the pure
decision, and returns a :class:`~eventcoord.context.Decision`; it never appends itself.
"""

from __future__ import annotations

from eventcoord import commands as c
from eventcoord.context import Handler
from eventcoord.domain import streams
from eventcoord.handlers import (
    files,
    issues,
    messages,
    named_leases,
    queue,
    sessions,
    tokens,
    waits,
)
from eventcoord.handlers.common import guard_lock_ahead, session_read_ahead
from eventcoord.store.base import ReadsAhead

HANDLERS: dict[type[c.Command], Handler] = {
    # sessions
    c.RegisterAgent: sessions.register_agent,
    c.HeartbeatAgent: sessions.heartbeat_agent,
    c.EndAgent: sessions.end_agent,
    # issues (leases and the WIP cap)
    c.ConfigureProject: issues.configure_project,
    c.ClaimIssue: issues.claim_issue,
    c.ReleaseIssue: issues.release_issue,
    c.VerifyHold: issues.verify_hold,
    # files
    c.ClaimFiles: files.claim_files,
    c.ReleaseFiles: files.release_files,
    # messages
    c.PostMessage: messages.post_message,
    # queue
    c.EnqueueWork: queue.enqueue_work,
    c.ClaimNextWork: queue.claim_next_work,
    c.StartWork: queue.start_work,
    c.FinishWork: queue.finish_work,
    # named leases
    c.AcquireLease: named_leases.acquire_lease,
    c.RenewLease: named_leases.renew_lease,
    c.ReleaseLease: named_leases.release_lease,
    # waiting lines
    c.CancelWait: waits.cancel_wait,
    # tokens
    c.IssueToken: tokens.issue_token,
    c.RevokeToken: tokens.revoke_token,
}

#: Commands whose first read is their own session's row, locked: a PostgreSQL batch may
#: read those of all its commands in one statement (``store/postgres/session_rows.py``).
READS_OWN_SESSION_FIRST = (c.HeartbeatAgent, c.EndAgent)


def read_ahead(workspace: str, cmd: c.Command) -> ReadsAhead | None:
    """What ``cmd``'s handler reads or locks first, which a PostgreSQL batch may read or
    lock for all its commands in one statement (``store/postgres/session_rows.py``,
    ``store/postgres/held_locks.py``); None: nothing of the kind."""
    from eventcoord.store.postgres.ahead import files as files_ahead
    from eventcoord.store.postgres.ahead import queue as queue_ahead

    if isinstance(cmd, READS_OWN_SESSION_FIRST):
        return session_read_ahead(workspace, cmd.session_id)
    if isinstance(cmd, c.ClaimIssue):  # its project's guard, then what the guard protects
        return guard_lock_ahead(workspace, streams.project(cmd.project)), issues.claim_rows_ahead(workspace, cmd)
    if isinstance(cmd, c.ReleaseIssue):  # its lease's project's guard, then its session, lease and line
        return issues.release_lock_ahead(workspace, cmd.issue), issues.release_rows_ahead(workspace, cmd)
    if isinstance(cmd, c.ClaimFiles):  # its workspace's lock, then its session and probes
        claim = files_ahead.claim_rows_ahead(workspace, cmd)
        lock = files_ahead.workspace_lock_ahead(workspace)
        return lock if claim is None else (lock, claim)
    if isinstance(cmd, c.ClaimNextWork):  # its project's guard, then its rules, session and first page
        return guard_lock_ahead(workspace, streams.project(cmd.project)), queue_ahead.pull_rows_ahead(workspace, cmd)
    if isinstance(cmd, (c.StartWork, c.FinishWork)):  # its item's project's guard, then the item, rules, session
        lock = queue_ahead.transition_lock_ahead(workspace, cmd.item_id)
        return lock, queue_ahead.transition_rows_ahead(workspace, cmd)
    if isinstance(cmd, c.ReleaseFiles):  # likewise: its session, the line, its claims
        return files_ahead.workspace_lock_ahead(workspace), files_ahead.release_rows_ahead(workspace, cmd)
    return None
