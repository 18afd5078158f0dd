"""What a sync plans on and what it plans: the two sides as plain data, and the steps.

The inputs are what the runner read (GitHub's open issues, eventcoord's leases, queue, live
sessions and ended leases); the steps are the writes, in the order they must happen: ``gh``
calls (``GhEdit``, ``GhComment``) and eventcoord commands (``Remember``, ``Notify``,
``Hold``, ``Release``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from eventcoord.github.memory import Record
from eventcoord.github.names import HOLD_PREFIX, Logins


@dataclass(frozen=True)
class GitHubIssue:
    """An open GitHub issue as ``gh issue list`` shows it."""

    number: int
    labels: frozenset[str] = frozenset()
    assignees: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Lease:
    """An unreleased lease, as ``/v1/leases`` shows it."""

    issue: str
    project: str
    session_id: str
    actor_key: str
    fencing_token: int
    live: bool
    kind: str = "agent"

    @property
    def is_hold(self) -> bool:
        """A hold the mirror recorded for a person who marked the issue WIP on GitHub."""
        return self.kind == "human" and self.actor_key.startswith(HOLD_PREFIX)

    @property
    def shows_wip(self) -> bool:
        """Someone works it now: a live lease, or a person's (never reclaimed automatically)."""
        return not self.is_hold and (self.live or self.kind == "human")


@dataclass(frozen=True)
class Holder:
    """One side of a takeover."""

    session_id: str
    fencing_token: int
    actor_key: str | None = None


@dataclass(frozen=True)
class Takeover:
    """A lease that ended ``expired`` or ``superseded``, and the grant that followed it, if any."""

    position: int
    issue: str
    project: str | None
    reason: str
    before: Holder
    after: Holder | None = None
    handoff_note: str | None = None


@dataclass(frozen=True)
class Coordination:
    """What eventcoord says, within the sync's scope."""

    leases: tuple[Lease, ...] = ()
    #: Issue keys with a work item queued or claimed, and the item's project.
    queued: Mapping[str, str] = field(default_factory=dict)
    #: Actor keys of the live sessions.
    live_actors: frozenset[str] = frozenset()
    #: Issues that a live session declares it is working on.
    declared: frozenset[str] = frozenset()
    #: Leases that ended expired or superseded after the memory's cursor, in log order.
    takeovers: tuple[Takeover, ...] = ()
    #: The position of the last release read after the cursor, and how many were read.
    released_to: int = 0
    releases_read: int = 0


@dataclass(frozen=True)
class Scope:
    """What one sync mirrors: a repository, optionally one project, with its logins map."""

    repo: str
    project: str | None = None
    logins: Logins = field(default_factory=Logins)

    def covers(self, project: str | None) -> bool:
        """The sync mirrors issues of ``project``."""
        return self.project is None or project == self.project


# --- steps ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GhEdit:
    """``gh issue edit N`` adding and removing the mirror's labels and assignees."""

    number: int
    add_labels: tuple[str, ...] = ()
    remove_labels: tuple[str, ...] = ()
    add_assignees: tuple[str, ...] = ()
    remove_assignees: tuple[str, ...] = ()


@dataclass(frozen=True)
class GhComment:
    """``gh issue comment N --body TEXT``."""

    number: int
    body: str


@dataclass(frozen=True)
class Remember:
    """Post one memory record on the mirror's channel."""

    record: Record


@dataclass(frozen=True)
class Notify:
    """Post a message to a session's channel ``agent:<session_id>``, once (``command_id``)."""

    session_id: str
    body: str
    command_id: str


@dataclass(frozen=True)
class Hold:
    """Register a human session of actor ``github:<login>`` and claim the issue's keys."""

    number: int
    login: str
    claims: tuple[tuple[str, str], ...]  # (project, issue key)


@dataclass(frozen=True)
class Release:
    """End a hold's session: the person's WIP label is gone, so is the hold."""

    number: int
    session_id: str
    actor_key: str
    issues: tuple[str, ...]


Step = GhEdit | GhComment | Remember | Notify | Hold | Release
GH_STEPS = (GhEdit, GhComment)


@dataclass(frozen=True)
class Plan:
    """The steps of one sync, in order, and what it left alone."""

    steps: tuple[Step, ...] = ()
    #: Issue keys whose GitHub issue is not among the open issues.
    skipped: tuple[str, ...] = ()
    #: Why an issue marked WIP on GitHub got no hold (``#N: reason``).
    not_held: tuple[str, ...] = ()

    @property
    def gh_writes(self) -> tuple[GhEdit | GhComment, ...]:
        """The ``gh`` calls, in order."""
        return tuple(s for s in self.steps if isinstance(s, GhEdit | GhComment))
