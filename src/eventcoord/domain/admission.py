"""Admission of an issue grant: the project cap, the per-agent cap, the lock delay.

The rules: docs/protocol.md#claim_issue-in-order, docs/protocol.md#per-agent-limit and
docs/protocol.md#lock-delay.

One set of rules for a direct claim and for a hand-off to a waiter. Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventcoord import errors
from eventcoord.codec import format_time
from eventcoord.context import Context, Draft
from eventcoord.domain import refusals, streams
from eventcoord.events import WipCapDenied

DEFAULT_WIP_LIMIT = 3


@dataclass(frozen=True, slots=True)
class ProjectRules:
    """A project's configuration (defaults for a project never configured)."""

    wip_limit: int = DEFAULT_WIP_LIMIT
    lock_delay_seconds: int = 0
    agent_wip_limit: int | None = None


@dataclass(frozen=True, slots=True)
class DelayFrom:
    """The last involuntary end of a lease on an issue: when, and whose lease it was."""

    ended_us: int
    session_id: str


def lock_delay_until(rules: ProjectRules, ended: DelayFrom | None, session_id: str) -> int | None:
    """The moment before which ``session_id`` may not be granted the issue, if any.

    The session whose lease ended is not held back (it may only resume its own work).
    """
    if rules.lock_delay_seconds <= 0 or ended is None or ended.session_id == session_id:
        return None
    return ended.ended_us + rules.lock_delay_seconds * 1_000_000


def delayed(issue: str, holder: dict[str, object] | None, until_us: int) -> errors.DomainError:
    """ISSUE_HELD with ``details.reason: lock_delay`` and ``until``."""
    e = refusals.issue_held(issue, holder)
    return errors.DomainError(
        e.code,
        f"issue {issue!r} is in its lock delay until {format_time(until_us)}",
        {**e.details, "reason": "lock_delay", "until": format_time(until_us)},
    )


def check_caps(
    d: Draft,
    project: str,
    issue: str,
    me_session: str,
    me_actor: str,
    rules: ProjectRules,
    live_count: int,
    agent_held: int,
) -> bool:
    """The project cap, then the per-agent cap; a refusal is recorded (``WipCapDenied``).

    Returns False (with ``d.error`` set and the denial appended) when one is reached.
    """
    if live_count >= rules.wip_limit:
        d.add(
            streams.project(project),
            WipCapDenied(
                project=project,
                issue=issue,
                session_id=me_session,
                actor_key=me_actor,
                limit=rules.wip_limit,
                live_count=live_count,
            ),
        )
        d.error = refusals.wip_cap_reached(project, rules.wip_limit, live_count)
        return False
    limit = rules.agent_wip_limit
    if limit is not None and agent_held >= limit:
        d.add(
            streams.project(project),
            WipCapDenied(
                project=project,
                issue=issue,
                session_id=me_session,
                actor_key=me_actor,
                limit=limit,
                live_count=agent_held,
                scope="agent",
            ),
        )
        d.error = refusals.agent_wip_cap_reached(project, limit, agent_held)
        return False
    return True


def admits(rules: ProjectRules, live_count: int, agent_held: int, delay_until: int | None, ctx: Context) -> str | None:
    """Why a hand-off to a waiter may not happen now (``cap``, ``agent_cap``, ``lock_delay``)."""
    if live_count >= rules.wip_limit:
        return "cap"
    if rules.agent_wip_limit is not None and agent_held >= rules.agent_wip_limit:
        return "agent_cap"
    if delay_until is not None and ctx.now_us < delay_until:
        return "lock_delay"
    return None
