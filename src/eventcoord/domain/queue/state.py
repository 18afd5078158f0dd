"""What queue decisions decide on: work items, claims, stale work, and how they read more.

Handlers load these (locking what they load); what selection needs as it goes it asks of
:class:`WorkReads`, which the handler implements and the unit tests implement in memory.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from eventcoord.domain.handoff import IssueLine
from eventcoord.domain.issues import IssueView, LeaseState
from eventcoord.domain.sessions import SessionState

#: The statuses of an item a worker holds.
ACTIVE = ("claimed", "running")


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


@dataclass(frozen=True, slots=True)
class StaleWork:
    """A project's items whose non-human workers are no longer live, and their issues' leases.

    ``items`` are :func:`stale_items` (in selection order); ``leases`` the unreleased lease
    of each of their issues, as loaded (and locked) before the decision.
    """

    items: Sequence[ItemState] = ()
    leases: Mapping[str, LeaseState | None] = field(default_factory=dict)


class QueuedItems(Protocol):
    """A project's queued items in selection order, read as they are iterated."""

    def __iter__(self) -> Iterator[ItemState]: ...

    def narrow(self, issues: Collection[str]) -> None:
        """From the next page read on, only the items without an issue or on one of ``issues``."""


class WorkReads(Protocol):
    """What queue decisions read as they go; the handler loads (and locks) each on demand."""

    def stale_work(self, caller: str | None) -> StaleWork:
        """The project's stale work (its items, workers and leases locked)."""

    def locked_item(self, item_id: str) -> ItemState | None:
        """The item, its row locked."""

    def queued(self, caller: str, recovered: Collection[str]) -> QueuedItems:
        """The project's queued items in selection order (rows others lock are skipped),
        without those on issues another session than ``caller`` holds, live or stale (no
        pull takes them), unless in ``recovered`` (this pull's recovery released them)."""

    def statuses(self, item_ids: list[str]) -> Mapping[str, str]:
        """The status of each of these items."""

    def exclusive_claims(self, paths: Sequence[str]) -> list[FileClaimView]:
        """The workspace's unreleased exclusive file claims that could overlap ``paths`` (at
        least those that do), with their holders' liveness."""

    def issue(self, issue: str) -> IssueView:
        """The issue as effective state sees it, its lease locked."""

    def live_leases(self, issue: str) -> int:
        """The project's live leases, not counting any lease on ``issue``."""

    def held_issues(self, session_id: str) -> Collection[str]:
        """The issues whose unreleased lease ``session_id`` holds (in the workspace)."""

    def lease(self, issue: str) -> LeaseState | None:
        """The issue's unreleased lease, locked."""

    def other_active_items(self, item: ItemState) -> int:
        """How many other claimed/running items of ``item``'s worker name its issue."""

    def issue_line(self, issue: str) -> IssueLine | None:
        """The issue's waiting line, ready for a hand-off (None when nobody waits)."""


@dataclass(frozen=True, slots=True)
class EnqueueState:
    """What enqueue_work decides on; the project is locked."""

    existing: Sequence[str]  # which of the command's blockers exist in this workspace
    issue_project: str | None  # the project the command's issue belongs to, if any yet
    reads: WorkReads


@dataclass(frozen=True, slots=True)
class ClaimNextState:
    """What claim_next_work decides on: the caller (locked), the cap; the rest via ``reads``."""

    session: SessionState | None
    wip_limit: int
    reads: WorkReads


@dataclass(frozen=True, slots=True)
class TransitionState:
    """What start_work and finish_work decide on: the item, the caller's session (locked).

    ``item`` is None when it is not an item of this workspace (then nothing else is
    loaded); ``session`` is None when it is unknown or none was named (an admin).
    """

    item: ItemState | None
    session: SessionState | None
    reads: WorkReads | None = None
