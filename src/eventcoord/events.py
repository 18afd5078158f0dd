"""Domain events: immutable facts, past tense, each with an explicit stable tag.

The tag is the event ``type`` on the wire and in the store; renaming a class must never
change it. Evolve an event by adding fields with defaults, never by changing a type.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

ReleaseReason = Literal["released", "completed", "agent_ended", "expired", "overridden", "superseded"]
WorkOutcome = Literal["done", "failed", "oom_killed", "cancelled"]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every domain event; subclasses set ``tag=`` explicitly."""


# --- sessions -------------------------------------------------------------------------


class AgentRegistered(Event, frozen=True, kw_only=True, tag="AgentRegistered"):
    session_id: str
    actor_key: str
    identity_source: str
    stable: bool
    kind: Literal["agent", "human"] = "agent"
    host: str | None = None
    runtime: str | None = None
    working_on: str | None = None
    #: The token that registered the session: only it (or an admin) may drive the session.
    token_id: str | None = None


class AgentHeartbeat(Event, frozen=True, kw_only=True, tag="AgentHeartbeat"):
    session_id: str
    # Absent keeps the declaration, null clears it, a key declares it.
    working_on: str | UnsetType | None = UNSET


class AgentEnded(Event, frozen=True, kw_only=True, tag="AgentEnded"):
    session_id: str
    handoff_note: str | None = None


class HeartbeatsCompacted(Event, frozen=True, kw_only=True, tag="HeartbeatsCompacted"):
    """A session's heartbeats up to a position, summarised. The protocol reserves the type;
    nothing emits it yet (no compaction runs), so no projection applies it."""

    session_id: str
    up_to_position: int
    count: int


class HandoffNoted(Event, frozen=True, kw_only=True, tag="HandoffNoted"):
    issue: str
    session_id: str
    note: str


# --- projects and issue leases --------------------------------------------------------


class ProjectConfigured(Event, frozen=True, kw_only=True, tag="ProjectConfigured"):
    project: str
    wip_limit: int
    # Absent (UNSET) when not configured, so the wire shape of a plain cap is unchanged.
    lock_delay_seconds: int | UnsetType = UNSET
    agent_wip_limit: int | UnsetType = UNSET


class LeaseGranted(Event, frozen=True, kw_only=True, tag="LeaseGranted"):
    project: str
    issue: str
    session_id: str
    actor_key: str
    fencing_token: int
    handed_off: bool | UnsetType = UNSET  # true: granted to the first waiter of the line


class LeaseReleased(Event, frozen=True, kw_only=True, tag="LeaseReleased"):
    issue: str
    session_id: str
    reason: ReleaseReason
    fencing_token: int = 0
    by_session_id: str | None = None
    # When the lease counts as ended for the lock delay: set for ``expired``
    # (its holder's last sign of life + TTL) and ``superseded`` (now); else None.
    ended_at_us: int | UnsetType = UNSET
    # The lease's project, where the decision read it (stored shape v3, docs/events.md; an
    # agent's end and rows of older shapes leave it out: the projection then reads it off the lease).
    project: str | UnsetType = UNSET


class WipCapDenied(Event, frozen=True, kw_only=True, tag="WipCapDenied"):
    project: str
    issue: str
    session_id: str
    actor_key: str
    limit: int
    live_count: int
    scope: Literal["project", "agent"] | UnsetType = UNSET  # "agent": the per-agent limit


# --- file claims, conflicts, messages -------------------------------------------------


class FilesClaimed(Event, frozen=True, kw_only=True, tag="FilesClaimed"):
    issue: str
    session_id: str | None
    actor_key: str
    paths: list[str]
    exclusive: bool = True
    handed_off: bool | UnsetType = UNSET


class FileClaimReleased(Event, frozen=True, kw_only=True, tag="FileClaimReleased"):
    issue: str
    session_id: str | None
    paths: list[str]
    reason: ReleaseReason
    by_session_id: str | None = None


class ClaimConflict(Event, frozen=True, kw_only=True, tag="ClaimConflict"):
    path: str
    issue: str
    session_id: str | None
    holder_path: str
    holder_issue: str
    holder_session_id: str | None
    forced: bool
    actor_key: str | None = None
    holder_actor_key: str | None = None


class MessagePosted(Event, frozen=True, kw_only=True, tag="MessagePosted"):
    channel: str
    body: str
    session_id: str | None = None
    actor_key: str | None = None


# --- work queue and named leases ------------------------------------------------------


class WorkEnqueued(Event, frozen=True, kw_only=True, tag="WorkEnqueued"):
    item_id: str
    project: str
    issue: str | None = None
    priority: int = 0
    payload: Any = None
    blocked_by: list[str] = []
    paths: list[str] = []


class WorkClaimed(Event, frozen=True, kw_only=True, tag="WorkClaimed"):
    item_id: str
    project: str
    issue: str | None
    session_id: str
    actor_key: str
    host: str | None = None
    fencing_token: int | None = None


class WorkStarted(Event, frozen=True, kw_only=True, tag="WorkStarted"):
    item_id: str
    session_id: str


class WorkFinished(Event, frozen=True, kw_only=True, tag="WorkFinished"):
    item_id: str
    session_id: str | None
    outcome: WorkOutcome


class WorkRequeued(Event, frozen=True, kw_only=True, tag="WorkRequeued"):
    item_id: str
    session_id: str | None
    reason: str


class NamedLeaseAcquired(Event, frozen=True, kw_only=True, tag="NamedLeaseAcquired"):
    name: str
    session_id: str
    actor_key: str
    fencing_token: int
    ttl_seconds: int
    expires_at_us: int
    handed_off: bool | UnsetType = UNSET
    capacity: int | UnsetType = UNSET  # absent: 1


class NamedLeaseRenewed(Event, frozen=True, kw_only=True, tag="NamedLeaseRenewed"):
    name: str
    session_id: str
    fencing_token: int
    ttl_seconds: int
    expires_at_us: int


class NamedLeaseReleased(Event, frozen=True, kw_only=True, tag="NamedLeaseReleased"):
    name: str
    session_id: str
    reason: str = "released"


# --- waiting lines (docs/protocol.md#waiting) ---------------------------------------------

WaitKind = Literal["issue", "files", "lease"]


class WaitStarted(Event, frozen=True, kw_only=True, tag="WaitStarted"):
    """A session joined the FIFO line of a resource (its place is its position in the log).

    ``key`` is the issue, the first requested path pattern, or the lease name; a files wait
    covers all of ``paths`` for ``issue`` (all-or-nothing, like the claim it stands for).
    What a grant needs later (project, exclusive, ttl, capacity) is kept here.
    """

    kind: WaitKind
    key: str
    session_id: str
    actor_key: str
    project: str | None = None
    issue: str | None = None
    paths: list[str] = []
    exclusive: bool = True
    ttl_seconds: int | None = None
    capacity: int | None = None


class WaitAbandoned(Event, frozen=True, kw_only=True, tag="WaitAbandoned"):
    """A waiter left a line without a grant: ``cancelled``, ``stale``, ``ended``."""

    kind: WaitKind
    key: str
    session_id: str
    reason: str
    issue: str | None = None
    by_session_id: str | None = None


class DeadlockRefused(Event, frozen=True, kw_only=True, tag="DeadlockRefused"):
    """A wait refused because it would close a cycle in the wait-for graph.

    ``cycle`` names, in order, each session and the resource it waits for, whose holder is
    the next entry's session (the last entry's resource is held by the first session).
    """

    kind: WaitKind
    key: str
    session_id: str
    actor_key: str
    cycle: list[dict[str, str]]


AnyEvent = (
    AgentRegistered
    | AgentHeartbeat
    | AgentEnded
    | HeartbeatsCompacted
    | HandoffNoted
    | ProjectConfigured
    | LeaseGranted
    | LeaseReleased
    | WipCapDenied
    | FilesClaimed
    | FileClaimReleased
    | ClaimConflict
    | MessagePosted
    | WorkEnqueued
    | WorkClaimed
    | WorkStarted
    | WorkFinished
    | WorkRequeued
    | NamedLeaseAcquired
    | NamedLeaseRenewed
    | NamedLeaseReleased
    | WaitStarted
    | WaitAbandoned
    | DeadlockRefused
)

#: Every event class by its stable tag.
EVENT_TYPES: dict[str, type[Event]] = {cls.__struct_config__.tag: cls for cls in AnyEvent.__args__}

#: Events written by a refused command: facts worth keeping, not signs of life.
DENIALS: frozenset[str] = frozenset({"WipCapDenied", "ClaimConflict", "DeadlockRefused"})
