"""What a PostgreSQL batch reads or locks ahead for each command type: ``READS_AHEAD``.

Each entry says what the command's handler reads or locks first (its session's row, a
guard, then what the guard protects), which a batch reads or locks for all its commands
in one statement each; a type not listed reads nothing ahead.
"""

from __future__ import annotations

from collections.abc import Callable

from eventcoord import commands as c
from eventcoord.domain import streams
from eventcoord.store.postgres.ahead import ReadsAhead, files, issues, queue
from eventcoord.store.postgres.ahead.common import guard_lock_ahead, session_read_ahead
from eventcoord.store.postgres.ahead.files import workspace_lock_ahead


def _own_session(workspace: str, cmd: c.Command) -> ReadsAhead | None:
    """Its own session's row, locked."""
    assert isinstance(cmd, (c.HeartbeatAgent, c.EndAgent))
    return session_read_ahead(workspace, cmd.session_id)


def _claim_issue(workspace: str, cmd: c.Command) -> ReadsAhead | None:
    """Its project's guard, then what the guard protects."""
    assert isinstance(cmd, c.ClaimIssue)
    return guard_lock_ahead(workspace, streams.project(cmd.project)), issues.claim_rows_ahead(workspace, cmd)


def _release_issue(workspace: str, cmd: c.Command) -> ReadsAhead | None:
    """Its lease's project's guard, then its session, lease and line."""
    assert isinstance(cmd, c.ReleaseIssue)
    return issues.release_lock_ahead(workspace, cmd.issue), issues.release_rows_ahead(workspace, cmd)


def _claim_files(workspace: str, cmd: c.Command) -> ReadsAhead | None:
    """Its workspace's lock, then its session and probes."""
    assert isinstance(cmd, c.ClaimFiles)
    claim = files.claim_rows_ahead(workspace, cmd)
    lock = workspace_lock_ahead(workspace)
    return lock if claim is None else (lock, claim)


def _release_files(workspace: str, cmd: c.Command) -> ReadsAhead | None:
    """Its workspace's lock, then its session, the line and its claims."""
    assert isinstance(cmd, c.ReleaseFiles)
    return workspace_lock_ahead(workspace), files.release_rows_ahead(workspace, cmd)


def _claim_next_work(workspace: str, cmd: c.Command) -> ReadsAhead | None:
    """Its project's guard, then its rules, session and first page."""
    assert isinstance(cmd, c.ClaimNextWork)
    return guard_lock_ahead(workspace, streams.project(cmd.project)), queue.pull_rows_ahead(workspace, cmd)


def _transition_work(workspace: str, cmd: c.Command) -> ReadsAhead | None:
    """Its item's project's guard, then the item, its rules and session."""
    assert isinstance(cmd, (c.StartWork, c.FinishWork))
    return queue.transition_lock_ahead(workspace, cmd.item_id), queue.transition_rows_ahead(workspace, cmd)


#: Per command type: what its handler reads or locks first (None: nothing of the kind).
READS_AHEAD: dict[type[c.Command], Callable[[str, c.Command], ReadsAhead | None]] = {
    c.HeartbeatAgent: _own_session,
    c.EndAgent: _own_session,
    c.ClaimIssue: _claim_issue,
    c.ReleaseIssue: _release_issue,
    c.ClaimFiles: _claim_files,
    c.ReleaseFiles: _release_files,
    c.ClaimNextWork: _claim_next_work,
    c.StartWork: _transition_work,
    c.FinishWork: _transition_work,
}


def reads_ahead(command: tuple[str, c.Command] | None) -> ReadsAhead | None:
    """What the command (workspace, command) of a ``transact`` reads or locks first."""
    if command is None:
        return None
    spec = READS_AHEAD.get(type(command[1]))
    return None if spec is None else spec(*command)
