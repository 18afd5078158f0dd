"""Givens shared by the queue and named-lease unit tests: a fixed clock, sessions, work
items, refusals, and :class:`MemoryReads` (the queue's reads, in memory)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from eventcoord.context import Caller, Context
from eventcoord.domain.issues import IssueView, LeaseState
from eventcoord.domain.queue import FileClaimView, ItemState, StaleWork
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError

NOW = 1_800_000_000_000_000
TTL = 10
SECOND = 1_000_000


def ctx(now_us: int = NOW, role: str = "agent") -> Context:
    return Context(Caller("default", role), now_us, TTL)  # type: ignore[arg-type]


def session(
    sid: str = "s-a", *, kind: str = "agent", last_seen_us: int = NOW, ended_us: int | None = None
) -> SessionState:
    return SessionState(sid, f"actor-{sid}", kind, True, "explicit-override", "host-1", last_seen_us, ended_us, None)


def gone(sid: str) -> SessionState:
    """A session last seen exactly one TTL ago: no longer live."""
    return session(sid, last_seen_us=NOW - TTL * SECOND)


def code_of(fn: Any, *args: Any) -> tuple[str, dict[str, Any]]:
    """The code and details of the refusal ``fn(*args)`` raises."""
    with pytest.raises(DomainError) as e:
        fn(*args)
    return e.value.code, e.value.details


def item(
    status: str = "queued",
    session_id: str | None = None,
    *,
    item_id: str = "w-1",
    priority: int = 0,
    position: int = 1,
    issue: str | None = None,
    blocked_by: tuple[str, ...] = (),
    paths: tuple[str, ...] = (),
) -> ItemState:
    return ItemState(item_id, "P", issue, priority, status, session_id, None, blocked_by, paths, None, position)


@dataclass
class MemoryQueue:
    """QueuedItems over a list; once narrowed (recorded in ``asked``), only the items
    without an issue or on one of the narrowed issues come after."""

    items: list[ItemState]
    asked: list[str]
    only: frozenset[str] | None = None

    def narrow(self, issues: Collection[str]) -> None:
        self.only = frozenset(issues)
        self.asked.append(f"narrow:{','.join(sorted(issues))}")

    def __iter__(self) -> Iterator[ItemState]:
        for i in self.items:
            if self.only is None or i.issue is None or i.issue in self.only:
                yield i


@dataclass
class MemoryReads:
    """WorkReads over plain values; records what was asked, in order."""

    stale: StaleWork = field(default_factory=StaleWork)
    queue: list[ItemState] = field(default_factory=list)
    items: dict[str, ItemState] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)
    claims: list[FileClaimView] = field(default_factory=list)
    issues: dict[str, IssueView] = field(default_factory=dict)
    live: dict[str, int] = field(default_factory=dict)
    leases: dict[str, LeaseState] = field(default_factory=dict)
    others: int = 0
    asked: list[str] = field(default_factory=list)

    def stale_work(self, caller: str | None) -> StaleWork:
        self.asked.append(f"stale_work:{caller}")
        return self.stale

    def locked_item(self, item_id: str) -> ItemState | None:
        return self.items.get(item_id)

    def queued(self, caller: str, recovered: Collection[str]) -> MemoryQueue:
        """The queue without the items on issues another session holds (``leases``), as the
        store's pages leave them out, unless ``recovered``."""
        self.asked.append(f"queued:{caller}:{','.join(sorted(recovered))}")

        def passed(i: ItemState) -> bool:
            lease = self.leases.get(i.issue or "")
            return lease is not None and lease.session_id != caller and i.issue not in recovered

        return MemoryQueue(sorted((i for i in self.queue if not passed(i)), key=lambda i: i.order), self.asked)

    def statuses(self, item_ids: list[str]) -> Mapping[str, str]:
        self.asked.append(f"statuses:{','.join(item_ids)}")
        return {i: self.status[i] for i in item_ids if i in self.status}

    def exclusive_claims(self, paths: Sequence[str]) -> list[FileClaimView]:
        self.asked.append("claims")
        return self.claims

    def issue(self, issue: str) -> IssueView:
        self.asked.append(f"issue:{issue}")
        return self.issues.get(issue, IssueView(issue, None, None, None, ()))

    def live_leases(self, issue: str) -> int:
        self.asked.append(f"live:{issue}")
        return self.live.get(issue, 0)

    def held_issues(self, session_id: str) -> frozenset[str]:
        self.asked.append(f"held:{session_id}")
        return frozenset(i for i, lease in self.leases.items() if lease.session_id == session_id)

    def lease(self, issue: str) -> LeaseState | None:
        return self.leases.get(issue)

    def other_active_items(self, item: ItemState) -> int:
        return self.others

    def issue_line(self, issue: str) -> None:
        return None  # nobody waits in these givens (hand-offs: tests/unit/test_waits_decide.py)
