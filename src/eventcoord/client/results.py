"""Typed answers: one msgspec struct per command's ``result`` and per read's body.

Fields the protocol fixes (docs/protocol.md#commands, docs/protocol.md#reads) are required;
fields the server adds beyond it have defaults, and fields this client does not know are
ignored, so a newer server never breaks an older client.
"""

from __future__ import annotations

from typing import Any

import msgspec

from eventcoord.codec import WireEvent


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every typed answer."""


# --- shared shapes ---------------------------------------------------------------------


class Moment(Result, frozen=True, kw_only=True):
    """The moment a point-in-time answer (``as_of``, docs/protocol.md#history) describes."""

    position: int
    at: str | None = None


class Holder(Result, frozen=True, kw_only=True):
    """Who holds an issue: ``{session_id, actor_key, kind, live}``."""

    session_id: str
    actor_key: str
    kind: str = "agent"
    live: bool = True


class ReclaimedFrom(Result, frozen=True, kw_only=True):
    """The expired holder a claim took over from, with the note it left."""

    session_id: str
    actor_key: str
    handoff_note: str | None = None


class FileConflict(Result, frozen=True, kw_only=True):
    """A requested path and the claim it overlaps."""

    path: str
    holder_path: str
    holder_issue: str
    holder_session_id: str | None = None
    holder_actor_key: str | None = None


class ExpiredClaim(Result, frozen=True, kw_only=True):
    """A dead holder's claim released silently by a claim_files."""

    holder_path: str
    holder_issue: str
    holder_session_id: str | None = None


class WorkItem(Result, frozen=True, kw_only=True):
    """A work item as claim_next_work hands it out."""

    item_id: str
    project: str
    issue: str | None = None
    priority: int = 0
    status: str = "claimed"
    payload: Any = None
    blocked_by: list[str] = []
    paths: list[str] = []
    session_id: str | None = None
    fencing_token: int | None = None


# --- command results -------------------------------------------------------------------


class RegisterAgentResult(Result, frozen=True, kw_only=True):
    session_id: str
    actor_key: str
    identity_source: str
    stable: bool
    ttl_seconds: int


class HeartbeatAgentResult(Result, frozen=True, kw_only=True):
    last_heartbeat_at: str


class EndAgentResult(Result, frozen=True, kw_only=True):
    released_leases: list[str]
    released_claims: list[str]
    requeued_items: list[str] = []
    released_named_leases: list[str] = []


class ConfigureProjectResult(Result, frozen=True, kw_only=True):
    project: str | None = None
    wip_limit: int | None = None
    lock_delay_seconds: int = 0
    agent_wip_limit: int | None = None


class IssueTokenResult(Result, frozen=True, kw_only=True):
    # ``token`` is null when an idempotent replay answers (the secret is shown once).
    token: str | None
    token_id: str | None = None
    workspace: str | None = None
    role: str | None = None


class RevokeTokenResult(Result, frozen=True, kw_only=True):
    token_id: str | None = None


class ClaimIssueResult(Result, frozen=True, kw_only=True):
    issue: str
    fencing_token: int
    project: str | None = None
    handoff_note: str | None = None
    reclaimed_from: ReclaimedFrom | None = None
    superseded: Holder | None = None


class ReleaseIssueResult(Result, frozen=True, kw_only=True):
    issue: str | None = None
    reason: str | None = None
    fencing_token: int | None = None
    handed_off_to: str | None = None  # the waiter granted the issue in the same transaction


class ClaimFilesResult(Result, frozen=True, kw_only=True):
    claimed: list[str]
    overridden: list[FileConflict]
    exclusive: bool = True
    already_held: list[str] = []
    expired: list[ExpiredClaim] = []


class ReleaseFilesResult(Result, frozen=True, kw_only=True):
    released: list[str]


class PostMessageResult(Result, frozen=True, kw_only=True):
    position: int
    channel: str | None = None


class VerifyHoldResult(Result, frozen=True, kw_only=True):
    ok: bool
    enforced: bool
    effective_state: str
    reason: str


class EnqueueWorkResult(Result, frozen=True, kw_only=True):
    item_id: str


class ClaimNextWorkResult(Result, frozen=True, kw_only=True):
    item: WorkItem | None


class WorkTransitionResult(Result, frozen=True, kw_only=True):
    """start_work / finish_work: the item and its new status."""

    item_id: str | None = None
    status: str | None = None


class NamedLeaseResult(Result, frozen=True, kw_only=True):
    """acquire_lease / renew_lease / release_lease."""

    fencing_token: int
    expires_at: str
    name: str | None = None
    ttl_seconds: int | None = None
    renewed: bool = False
    released: bool = False


class CancelWaitResult(Result, frozen=True, kw_only=True):
    """cancel_wait: the line left."""

    kind: str
    key: str
    cancelled: bool = True


class CommandResult(Result, frozen=True, kw_only=True):
    """The result of a command this client has no struct for (its fields are dropped)."""


#: The result struct of each command ``type``; a command missing here answers CommandResult.
COMMAND_RESULTS: dict[str, type[Result]] = {
    "register_agent": RegisterAgentResult,
    "heartbeat_agent": HeartbeatAgentResult,
    "end_agent": EndAgentResult,
    "configure_project": ConfigureProjectResult,
    "issue_token": IssueTokenResult,
    "revoke_token": RevokeTokenResult,
    "claim_issue": ClaimIssueResult,
    "release_issue": ReleaseIssueResult,
    "claim_files": ClaimFilesResult,
    "release_files": ReleaseFilesResult,
    "post_message": PostMessageResult,
    "verify_hold": VerifyHoldResult,
    "enqueue_work": EnqueueWorkResult,
    "claim_next_work": ClaimNextWorkResult,
    "start_work": WorkTransitionResult,
    "finish_work": WorkTransitionResult,
    "acquire_lease": NamedLeaseResult,
    "renew_lease": NamedLeaseResult,
    "release_lease": NamedLeaseResult,
    "cancel_wait": CancelWaitResult,
}


# --- read bodies -----------------------------------------------------------------------


class Agent(Result, frozen=True, kw_only=True):
    session_id: str
    actor_key: str
    live: bool
    kind: str = "agent"
    identity_source: str | None = None
    stable: bool | None = None
    host: str | None = None
    #: The harness the session runs in (``claude``, ``codex``), when its identity names one.
    runtime: str | None = None
    working_on: str | None = None
    registered_at: str | None = None
    last_heartbeat_at: str | None = None
    ended_at: str | None = None


class AgentsPage(Result, frozen=True, kw_only=True):
    agents: list[Agent]
    as_of: Moment | None = None


class AgentDetail(Result, frozen=True, kw_only=True):
    agent: Agent
    work: list[dict[str, Any]] = []
    leases: list[dict[str, Any]] = []
    named_leases: list[dict[str, Any]] = []


class Lease(Result, frozen=True, kw_only=True):
    issue: str
    project: str
    session_id: str
    actor_key: str
    fencing_token: int
    live: bool
    kind: str | None = None
    granted_at: str | None = None


class LeasesPage(Result, frozen=True, kw_only=True):
    leases: list[Lease]
    as_of: Moment | None = None


class IssueState(Result, frozen=True, kw_only=True):
    issue: str
    state: str
    reason: str
    holder: Holder | None
    fencing_token: int | None = None
    project: str | None = None
    as_of: Moment | None = None


class FileClaim(Result, frozen=True, kw_only=True):
    path: str
    issue: str
    session_id: str | None
    actor_key: str | None = None
    exclusive: bool = True
    live: bool = True
    claimed_at: str | None = None
    position: int | None = None


class FileClaimsPage(Result, frozen=True, kw_only=True):
    file_claims: list[FileClaim]
    as_of: Moment | None = None


class Conflict(Result, frozen=True, kw_only=True):
    path: str
    issue: str
    session_id: str | None
    holder_issue: str
    holder_session_id: str | None
    forced: bool
    position: int | None = None
    holder_path: str | None = None
    actor_key: str | None = None
    holder_actor_key: str | None = None
    occurred_at: str | None = None


class ConflictsPage(Result, frozen=True, kw_only=True):
    conflicts: list[Conflict]


class Bucket(Result, frozen=True, kw_only=True):
    prefix: str
    count: int
    leaf: bool = False


class Heatmap(Result, frozen=True, kw_only=True):
    mode: str
    buckets: list[Bucket]
    depth: int | None = None
    prefix: str | None = None
    as_of: Moment | None = None


class QueueItem(Result, frozen=True, kw_only=True):
    item_id: str
    project: str
    status: str
    priority: int = 0
    issue: str | None = None
    outcome: str | None = None
    payload: Any = None
    blocked_by: list[str] = []
    paths: list[str] = []
    session_id: str | None = None
    actor_key: str | None = None
    host: str | None = None
    fencing_token: int | None = None
    attempts: int = 0
    enqueued_at: str | None = None
    updated_at: str | None = None
    history: list[dict[str, Any]] = []


class QueuePage(Result, frozen=True, kw_only=True):
    items: list[QueueItem]
    as_of: Moment | None = None


class Message(Result, frozen=True, kw_only=True):
    position: int
    channel: str
    body: str
    session_id: str | None
    actor_key: str | None = None
    recorded_at: str | None = None


class MessagesPage(Result, frozen=True, kw_only=True):
    messages: list[Message]


class EventsPage(Result, frozen=True, kw_only=True):
    events: list[WireEvent]


class NamedLease(Result, frozen=True, kw_only=True):
    """One named lease, or one held slot of a name with ``capacity`` above 1 (docs/protocol.md#capacity)."""

    name: str
    session_id: str | None = None
    actor_key: str | None = None
    fencing_token: int | None = None
    expires_at: str | None = None
    held: bool | None = None
    capacity: int = 1
    ttl_seconds: int | None = None
    acquired_at: str | None = None


class NamedLeasesPage(Result, frozen=True, kw_only=True):
    leases: list[NamedLease]


class Wait(Result, frozen=True, kw_only=True):
    """One waiter of a line (docs/protocol.md#waiting): place 1 is next."""

    kind: str
    key: str
    session_id: str
    actor_key: str
    place: int
    since: str
    issue: str | None = None


class WaitsPage(Result, frozen=True, kw_only=True):
    waits: list[Wait]
    #: The ``after`` of the next page; None on the last.
    next: str | None = None
