"""enqueue_work: blockers must exist, paths are normalised, an issue keeps its project."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from eventcoord import errors
from eventcoord.commands import EnqueueWork
from eventcoord.context import Context, Decision, Draft
from eventcoord.domain import streams
from eventcoord.domain.files import normalise_paths
from eventcoord.domain.queue.recovery import recover
from eventcoord.domain.queue.state import EnqueueState
from eventcoord.events import WorkEnqueued


def check_blockers(blocked_by: Sequence[str], existing: Iterable[str]) -> list[str]:
    """The blockers, deduplicated; each must be an item of this workspace."""
    known = set(existing)
    out: list[str] = []
    for i, item_id in enumerate(blocked_by):
        if item_id not in known:
            raise errors.invalid(f"blocked_by[{i}]", f"no work item {item_id!r} in this workspace")
        if item_id not in out:
            out.append(item_id)
    return out


def check_issue_project(issue: str | None, project: str, issue_project: str | None) -> None:
    """An issue belongs to the project named at its first claim (docs/protocol.md#concepts)."""
    if issue is not None and issue_project is not None and issue_project != project:
        raise errors.invalid("issue", f"issue {issue!r} belongs to project {issue_project!r}, not {project!r}")


def decide_enqueue_work(state: EnqueueState, cmd: EnqueueWork, ctx: Context) -> Decision:
    """Add an item to the queue (after re-queueing the project's stale work)."""
    paths = normalise_paths(cmd.paths)
    blockers = check_blockers(cmd.blocked_by, state.existing)
    check_issue_project(cmd.issue, cmd.project, state.issue_project)
    d = Draft(events=list(recover(state.reads.stale_work(None), None).events))
    item_id = ctx.make_id("w")
    enqueued = WorkEnqueued(
        item_id=item_id,
        project=cmd.project,
        issue=cmd.issue,
        priority=cmd.priority,
        payload=cmd.payload,
        blocked_by=blockers,
        paths=paths,
    )
    d.add(streams.work(item_id), enqueued)
    d.result = {"item_id": item_id}
    return d.decided()
