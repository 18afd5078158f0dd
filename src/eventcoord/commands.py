"""Commands: imperative requests posted to ``POST /v1/commands``, tagged by ``type``.

Decoding validates shape and key syntax (422 VALIDATION naming the field); the domain
decides everything else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from eventcoord.sanitize import (
    ACTOR_CAP,
    CHANNEL_PATTERN,
    COMMAND_ID_PATTERN,
    KEY_PATTERN,
    TOKEN_ID_PATTERN,
    WORKSPACE_PATTERN,
)

# A name is matched as a whole string by a pattern that means the same in Python and in
# ECMAScript (sanitize.py): the server and every JSON Schema client accept the same names.
Key = Annotated[str, Meta(pattern=KEY_PATTERN)]
Channel = Annotated[str, Meta(pattern=CHANNEL_PATTERN)]
WorkspaceName = Annotated[str, Meta(pattern=WORKSPACE_PATTERN)]
SessionId = Annotated[str, Meta(pattern=KEY_PATTERN)]
CommandId = Annotated[str, Meta(pattern=COMMAND_ID_PATTERN, min_length=1, max_length=128)]
#: A token's public id (``issue_token`` answers it; ``revoke_token`` takes it).
TokenId = Annotated[str, Meta(pattern=TOKEN_ID_PATTERN)]
# Free text is sanitised when the event is built; this only bounds what we accept.
Text = Annotated[str, Meta(max_length=65536)]
Role = Literal["admin", "human", "agent", "reader"]
Ttl = Annotated[int, Meta(ge=1, le=86400)]


class Command(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", forbid_unknown_fields=True):
    """Base of every command; ``command_id`` is the optional idempotency key."""

    command_id: CommandId | None = None


#: A name given as the actor: never empty, never cut (two long names must not become one).
Actor = Annotated[str, Meta(min_length=1, max_length=ACTOR_CAP)]


class RegisterAgent(Command, frozen=True, kw_only=True, tag="register_agent"):
    actor: Actor | None = None
    runtime: Annotated[str, Meta(max_length=64)] | None = None
    runtime_session_id: Text | None = None
    process_ancestry: Text | None = None
    host: Text | None = None
    kind: Literal["agent", "human"] = "agent"
    working_on: Key | None = None


class HeartbeatAgent(Command, frozen=True, kw_only=True, tag="heartbeat_agent"):
    session_id: SessionId
    working_on: Key | UnsetType | None = UNSET
    handoff_note: Text | None = None


class EndAgent(Command, frozen=True, kw_only=True, tag="end_agent"):
    session_id: SessionId
    handoff_note: Text | None = None


class ConfigureProject(Command, frozen=True, kw_only=True, tag="configure_project"):
    project: Key
    wip_limit: Annotated[int, Meta(ge=0, le=100000)]
    lock_delay_seconds: Annotated[int, Meta(ge=0, le=86400)] = 0
    agent_wip_limit: Annotated[int, Meta(ge=0, le=100000)] | None = None


class IssueToken(Command, frozen=True, kw_only=True, tag="issue_token"):
    role: Role
    workspace: WorkspaceName | None = None


class RevokeToken(Command, frozen=True, kw_only=True, tag="revoke_token"):
    token_id: TokenId


class ClaimIssue(Command, frozen=True, kw_only=True, tag="claim_issue"):
    session_id: SessionId
    project: Key
    issue: Key
    force: bool = False
    wait: bool = False


class ReleaseIssue(Command, frozen=True, kw_only=True, tag="release_issue"):
    session_id: SessionId
    issue: Key
    reason: Literal["released", "completed"] = "released"


class ClaimFiles(Command, frozen=True, kw_only=True, tag="claim_files"):
    issue: Key
    paths: Annotated[list[Annotated[str, Meta(max_length=4096)]], Meta(min_length=1, max_length=100)]
    session_id: SessionId | None = None
    exclusive: bool = True
    force: bool = False
    wait: bool = False


class ReleaseFiles(Command, frozen=True, kw_only=True, tag="release_files"):
    issue: Key
    session_id: SessionId | None = None
    paths: Annotated[list[Annotated[str, Meta(max_length=4096)]], Meta(max_length=100)] | None = None


class PostMessage(Command, frozen=True, kw_only=True, tag="post_message"):
    channel: Channel
    body: Text
    session_id: SessionId | None = None


class VerifyHold(Command, frozen=True, kw_only=True, tag="verify_hold"):
    session_id: SessionId
    issue: Key
    fencing_token: Annotated[int, Meta(ge=0, le=2**63 - 1)] | None = None


class EnqueueWork(Command, frozen=True, kw_only=True, tag="enqueue_work"):
    project: Key
    issue: Key | None = None
    priority: Annotated[int, Meta(ge=-1_000_000, le=1_000_000)] = 0
    payload: Any = None
    blocked_by: Annotated[list[Key], Meta(max_length=100)] = []
    paths: Annotated[list[Annotated[str, Meta(max_length=4096)]], Meta(max_length=100)] = []


class ClaimNextWork(Command, frozen=True, kw_only=True, tag="claim_next_work"):
    session_id: SessionId
    project: Key


class StartWork(Command, frozen=True, kw_only=True, tag="start_work"):
    session_id: SessionId
    item_id: Key


class FinishWork(Command, frozen=True, kw_only=True, tag="finish_work"):
    session_id: SessionId | None = None
    item_id: Key
    outcome: Literal["done", "failed", "oom_killed", "cancelled"] = "done"


class AcquireLease(Command, frozen=True, kw_only=True, tag="acquire_lease"):
    session_id: SessionId
    name: Key
    ttl_seconds: Ttl | None = None
    wait: bool = False
    capacity: Annotated[int, Meta(ge=1, le=10000)] | None = None


class RenewLease(Command, frozen=True, kw_only=True, tag="renew_lease"):
    session_id: SessionId
    name: Key
    ttl_seconds: Ttl | None = None


class ReleaseLease(Command, frozen=True, kw_only=True, tag="release_lease"):
    session_id: SessionId
    name: Key


class CancelWait(Command, frozen=True, kw_only=True, tag="cancel_wait"):
    """Leave a line: the issue's, the files wait of ``issue`` (with ``paths``), or a lease's."""

    session_id: SessionId
    issue: Key | None = None
    paths: Annotated[list[Annotated[str, Meta(max_length=4096)]], Meta(max_length=100)] | None = None
    name: Key | None = None


AnyCommand = (
    RegisterAgent
    | HeartbeatAgent
    | EndAgent
    | ConfigureProject
    | IssueToken
    | RevokeToken
    | ClaimIssue
    | ReleaseIssue
    | ClaimFiles
    | ReleaseFiles
    | PostMessage
    | VerifyHold
    | EnqueueWork
    | ClaimNextWork
    | StartWork
    | FinishWork
    | AcquireLease
    | RenewLease
    | ReleaseLease
    | CancelWait
)

#: Commands a ``reader`` token may never send: all of them. Role rules live in auth.
COMMAND_TYPES: dict[str, type[Command]] = {cls.__struct_config__.tag: cls for cls in AnyCommand.__args__}
