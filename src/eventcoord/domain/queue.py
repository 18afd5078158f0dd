"""The work queue: enqueue, selection predicates, transitions.

Pure decisions over the state a handler loaded. Rules decided here (SPEC §1, §5, p24):

* Lifecycle ``queued → claimed → running → done | failed | oom_killed | cancelled``.
  ``start_work`` moves ``claimed → running``; ``finish_work`` ends a ``running`` item with
  any outcome. ``cancelled`` may also end an item that never started: a ``claimed`` one
  (its holder or an admin) or a ``queued`` one (an admin only, else 403 FORBIDDEN). Any
  other move is 409 ``INVALID_TRANSITION`` ``{item_id, status, wanted}``; the status is
  checked first, then the holder: only the claiming session or an admin token moves a
  claimed/running item on (409 ``NOT_HOLDER``).
* ``blocked_by`` names items that must already exist in the workspace (422
  ``VALIDATION`` on ``blocked_by[i]``); an item is eligible once every blocker is
  ``done`` (a blocker that failed or was cancelled keeps it blocked).
* Declared ``paths`` are normalised like file claims (422 ``VALIDATION`` on ``paths[i]``);
  an item is skipped while one of them overlaps a live exclusive file claim of another
  session (session-less claims always count).
* Items without an issue take no lease, so the WIP cap (which counts issue leases) does
  not hold them back; their ``fencing_token`` is null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eventcoord.context import Context, Decision
from eventcoord.domain.paths import PathError, normalise_path, overlaps
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError, ValidationFailed
from eventcoord.events import (
    ReleaseReason,
    WorkClaimed,
    WorkFinished,
    WorkOutcome,
    WorkRequeued,
    WorkStarted,
)

ACTIVE = ("claimed", "running")
TERMINAL = frozenset({"done", "failed", "oom_killed", "cancelled"})


@dataclass(frozen=True, slots=True)
class ItemState:
    """One work item as the read model holds it (``payload`` is its JSON text)."""

    item_id: str
    project: str
    issue: str | None
    priority: int
    status: str
    session_id: str | None
    fencing_token: int | None
    blocked_by: tuple[str, ...]
    paths: tuple[str, ...]
    payload: str | None
    enqueued_position: int

    @property
    def order(self) -> tuple[int, int]:
        """Selection order: higher priority first, then the oldest."""
        return (-self.priority, self.enqueued_position)


@dataclass(frozen=True, slots=True)
class FileClaimView:
    """An unreleased exclusive file claim and whether its holder counts as present."""

    path: str
    session_id: str | None
    live: bool


def stream(item_id: str) -> str:
    """The event stream of one work item."""
    return f"work:{item_id}"


# --- enqueue ---------------------------------------------------------------------------


def normalise_paths(raw: Sequence[str]) -> list[str]:
    """Normalised declared paths, duplicates dropped; 422 VALIDATION on ``paths[i]``."""
    out: list[str] = []
    for i, path in enumerate(raw):
        try:
            norm = normalise_path(path)
        except PathError as e:
            raise ValidationFailed(f"paths[{i}]", f"invalid path {path!r}: {e}") from None
        if norm not in out:
            out.append(norm)
    return out


def check_blockers(blocked_by: Sequence[str], existing: Iterable[str]) -> list[str]:
    """The blockers, deduplicated; each must be an item of this workspace."""
    known = set(existing)
    out: list[str] = []
    for i, item_id in enumerate(blocked_by):
        if item_id not in known:
            raise ValidationFailed(f"blocked_by[{i}]", f"no work item {item_id!r} in this workspace")
        if item_id not in out:
            out.append(item_id)
    return out


def check_issue_project(issue: str | None, project: str, issue_project: str | None) -> None:
    """An issue belongs to the project named at its first claim (SPEC §5)."""
    if issue is not None and issue_project is not None and issue_project != project:
        raise ValidationFailed("issue", f"issue {issue!r} belongs to project {issue_project!r}, not {project!r}")


# --- selection -------------------------------------------------------------------------


def blockers_done(item: ItemState, statuses: Mapping[str, str]) -> bool:
    """Every blocker of ``item`` has finished with outcome ``done``."""
    return all(statuses.get(b) == "done" for b in item.blocked_by)


def blocking_path(item: ItemState, claims: Iterable[FileClaimView], session_id: str) -> str | None:
    """A declared path overlapping a present exclusive claim of someone else, if any."""
    others = [c for c in claims if c.session_id != session_id and (c.session_id is None or c.live)]
    for path in item.paths:
        for claim in others:
            if overlaps(path, claim.path):
                return path
    return None


def stale_items(
    items: Iterable[ItemState], workers: Mapping[str, SessionState], ctx: Context, exclude: str | None
) -> list[ItemState]:
    """Claimed or running items whose non-human worker is no longer live.

    The calling session is never stale: its own command is a sign of life.
    """
    out: list[ItemState] = []
    for item in items:
        if item.status not in ACTIVE or item.session_id is None or item.session_id == exclude:
            continue
        worker = workers.get(item.session_id)
        if worker is None or worker.kind == "human":
            continue
        if not ctx.is_live(worker.last_seen_us, worker.ended_us):
            out.append(item)
    return out


def requeued(item: ItemState, reason: str) -> tuple[WorkRequeued, ItemState]:
    """The re-queue event and the item as it stands afterwards."""
    event = WorkRequeued(item_id=item.item_id, session_id=item.session_id, reason=reason)
    after = ItemState(
        item.item_id, item.project, item.issue, item.priority, "queued", None, None,
        item.blocked_by, item.paths, item.payload, item.enqueued_position,
    )
    return event, after


def claimed(item: ItemState, me: SessionState, fencing_token: int | None) -> WorkClaimed:
    """The claim of ``item`` by ``me``."""
    return WorkClaimed(
        item_id=item.item_id,
        project=item.project,
        issue=item.issue,
        session_id=me.session_id,
        actor_key=me.actor_key,
        host=me.host,
        fencing_token=fencing_token,
    )


def item_view(item: ItemState, payload: Any, status: str, session_id: str | None, fencing_token: int | None) -> dict[str, Any]:
    """The item as ``claim_next_work`` answers it."""
    return {
        "item_id": item.item_id,
        "project": item.project,
        "issue": item.issue,
        "priority": item.priority,
        "status": status,
        "payload": payload,
        "blocked_by": list(item.blocked_by),
        "paths": list(item.paths),
        "session_id": session_id,
        "fencing_token": fencing_token,
    }


# --- transitions -----------------------------------------------------------------------


def _invalid(item: ItemState, wanted: str) -> DomainError:
    return DomainError(
        "INVALID_TRANSITION",
        f"work item {item.item_id!r} is {item.status}; it cannot become {wanted}",
        {"item_id": item.item_id, "status": item.status, "wanted": wanted},
    )


def _check_holder(item: ItemState, session_id: str | None, admin: bool) -> None:
    if admin or (session_id is not None and item.session_id == session_id):
        return
    raise DomainError(
        "NOT_HOLDER",
        f"work item {item.item_id!r} is held by another session",
        {"item_id": item.item_id, "session_id": session_id, "holder_session_id": item.session_id},
    )


def decide_start(item: ItemState, d: Decision, session_id: str, admin: bool) -> None:
    """``claimed → running``, by the holder or an admin."""
    if item.status != "claimed":
        raise _invalid(item, "running")
    _check_holder(item, session_id, admin)
    d.add(stream(item.item_id), WorkStarted(item_id=item.item_id, session_id=session_id))
    d.result = {"item_id": item.item_id, "status": "running"}


def decide_finish(item: ItemState, d: Decision, session_id: str | None, admin: bool, outcome: WorkOutcome) -> None:
    """End an item: ``running → any outcome``; ``claimed``/``queued`` → ``cancelled`` only."""
    if item.status == "queued" and outcome == "cancelled":
        if not admin:
            raise DomainError(
                "FORBIDDEN",
                "only an admin may cancel a queued work item",
                {"item_id": item.item_id, "status": item.status},
            )
    elif item.status == "running" or (item.status == "claimed" and outcome == "cancelled"):
        _check_holder(item, session_id, admin)
    else:
        raise _invalid(item, outcome)
    d.add(stream(item.item_id), WorkFinished(item_id=item.item_id, session_id=session_id, outcome=outcome))
    d.result = {"item_id": item.item_id, "status": outcome}


def finish_release_reason(outcome: str) -> ReleaseReason:
    """The reason the item's issue lease is released with when it ends."""
    return "completed" if outcome == "done" else "released"
