"""What a decision may know besides the command: who asks, the database's clock, the TTL."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from eventcoord import liveness
from eventcoord.errors import DomainError
from eventcoord.events import Event, WaitStarted

Role = Literal["admin", "human", "agent", "reader"]


@dataclass(frozen=True, slots=True)
class Caller:
    """The authenticated caller: a workspace, a role, whether it is the operator, and the
    ``token_id`` of the token it presented (sessions belong to the token that registered them)."""

    workspace: str
    role: Role
    operator: bool = False
    token_id: str | None = None


def new_id(prefix: str) -> str:
    """A fresh identifier such as ``s-187c…`` (sessions) or ``w-…`` (work items).

    Time-ordered (nanoseconds first, then 64 random bits), so new rows land at the end of
    their indexes instead of on random cold pages of a large B-tree.
    """
    return f"{prefix}-{time.time_ns():016x}{secrets.token_hex(8)}"


@dataclass(slots=True)
class Context:
    """Everything a handler needs beyond the command, fixed for one decision."""

    caller: Caller
    now_us: int
    ttl_seconds: int
    command_id: str | None = None
    correlation_id: str | None = None
    make_id: Callable[[str], str] = new_id

    @property
    def workspace(self) -> str:
        return self.caller.workspace

    @property
    def cutoff_us(self) -> int:
        """Sessions seen after this moment (and not ended) are live."""
        return liveness.cutoff(self.now_us, self.ttl_seconds)

    def is_live(self, last_seen_us: int | None, ended_us: int | None) -> bool:
        """Liveness at decision time: not ended and seen within the TTL (docs/protocol.md#concepts)."""
        return liveness.is_live(last_seen_us, ended_us, self.cutoff_us)


#: A handler: loads state on a connection, returns a Decision (see eventcoord.handlers).
Handler = Callable[[Any, "Context", Any], "Decision"]
#: An event and the stream it is appended to.
StreamEvent = tuple[str, Event]


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A refused claim that asks to wait (``wait: true``): what its line's join needs.

    The handler's second step loads the caller's wait and the wait-for graph under the
    workspace's lock, and the line when ``line`` is None, then calls ``domain.waits.join``
    (docs/protocol.md#waiting).
    """

    started: WaitStarted  # the event that puts the caller in the line
    refusal: DomainError  # why it waits: the answer gains ``waiting: {place, waiters}``
    holders: tuple[str, ...] = ()  # the live sessions it would wait for (edges of the graph)
    line: tuple[Any, ...] | None = None  # the line as the decision saw it (``domain.waits.Waiter``)


@dataclass(frozen=True, slots=True)
class Decision:
    """What a handler decided: events to append (by stream), the result, or a refusal.

    A refusal that carries events (``WipCapDenied``, ``ClaimConflict``) is committed with
    them and then answered as an error; any other refusal is raised as a DomainError.
    Decided once: a decision is built by a :class:`Draft`, and a second step (a join, a
    hand-off) builds a new one from it (:meth:`then`).
    """

    events: Sequence[StreamEvent] = field(default_factory=list)
    result: Any = None
    error: DomainError | None = None
    session_id: str | None = None
    actor_key: str | None = None
    #: When set, the answer's ``result[result_position]`` is the last appended position
    #: (a handler decides before the append, so it cannot know it itself).
    result_position: str | None = None
    #: For a command that appends nothing but must not be decided twice under one
    #: ``command_id`` (issue_token): the result a replay answers with (no secrets in it).
    replay_result: Any = None
    #: A refusal that asks to wait in a line: the handler joins it as its second step.
    join: JoinRequest | None = None

    def then(self) -> Draft:
        """A draft that goes on from this decision (its events, result and refusal copied)."""
        result = dict(self.result) if isinstance(self.result, dict) else self.result
        return Draft(
            list(self.events),
            result,
            self.error,
            self.session_id,
            self.actor_key,
            self.result_position,
            self.replay_result,
        )


@dataclass(slots=True)
class Draft:
    """A decision being made: events added one by one, the result and refusal set as found.

    Only a decision function (and the second step of a handler) holds one; :meth:`decided`
    gives the frozen :class:`Decision` it returns.
    """

    events: list[StreamEvent] = field(default_factory=list)
    result: Any = None
    error: DomainError | None = None
    session_id: str | None = None
    actor_key: str | None = None
    result_position: str | None = None
    replay_result: Any = None

    def add(self, stream: str, event: Event) -> None:
        """Append one event to the decision."""
        self.events.append((stream, event))

    def decided(self, join: JoinRequest | None = None) -> Decision:
        """The decision as it stands (``join``: it asks to wait; its refusal is ``join.refusal``)."""
        return Decision(
            list(self.events),
            self.result,
            join.refusal if join is not None and self.error is None else self.error,
            self.session_id,
            self.actor_key,
            self.result_position,
            self.replay_result,
            join,
        )
