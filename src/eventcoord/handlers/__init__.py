"""The table of contents of the write side: which handler decides which command.

A handler loads the state its decision needs (locking guard rows), calls the pure
decision, and returns a :class:`~eventcoord.context.Decision`; it never appends itself.
"""

from __future__ import annotations

from eventcoord import commands as c
from eventcoord.context import Handler
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
