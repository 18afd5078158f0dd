"""The plan of one sync: a pure function of eventcoord's state, GitHub's and the memory.

In order: holds whose WIP label is gone are released; a person's WIP label on a free issue
becomes a hold; each open issue's labels and assignees move to what its leases and queue
say (only what the mirror added is ever removed); a person's WIP on an issue an agent holds
is reported to the agent and on the issue; each lease that ended expired or superseded gets
its comment. A record is remembered *before* a write that adds (so a crash never leaves a
label the mirror would take for a person's) and *after* one that removes or comments (so a
failed write is tried again).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from eventcoord.github import texts
from eventcoord.github.memory import Added, Audited, Memory, Noted, Passed, Record, Removed
from eventcoord.github.model import (
    Coordination,
    GhComment,
    GhEdit,
    GitHubIssue,
    Hold,
    Lease,
    Notify,
    Plan,
    Release,
    Remember,
    Scope,
    Step,
    Takeover,
)
from eventcoord.github.names import HOLD_PREFIX, QUEUED, WIP, issue_number

MIRRORED_LABELS = (WIP, QUEUED)
#: How many releases a sync reads past its cursor before it records that it read them.
REREAD = 1000


def plan(world: Coordination, github: Mapping[int, GitHubIssue], memory: Memory, scope: Scope) -> Plan:
    """Every write that brings GitHub and eventcoord in line, in the order to make them."""
    out = _Steps(memory.seq)

    leases = [lease for lease in world.leases if scope.covers(lease.project)]
    queued = {k: p for k, p in world.queued.items() if scope.covers(p)}
    keys: dict[int, set[str]] = defaultdict(set)
    for key in [lease.issue for lease in leases] + list(queued):
        n = issue_number(key)
        if n is not None:
            keys[n].add(key)

    released = _releases(leases, github, memory)
    out.steps += released
    gone = {r.session_id for r in released}
    live = [lease for lease in leases if lease.session_id not in gone]
    leased = {lease.issue for lease in live}
    holds, not_held = _holds(world, github, memory, scope, live, keys, queued)
    out.steps += holds
    leased |= {key for hold in holds for _, key in hold.claims}

    by_number: dict[int, list[Lease]] = defaultdict(list)
    for lease in live:
        by_number[issue_number(lease.issue) or 0].append(lease)
    for n in sorted(github):
        mine = by_number.get(n, [])
        waiting = any(k in queued and k not in leased for k in keys.get(n, ()))
        _edit(out, n, github[n], memory, scope, mine, waiting)
        _conflicts(out, n, github[n], memory, scope, mine)

    skipped = {k for n, ks in keys.items() if n not in github for k in ks}
    cursor = memory.cursor
    for t in sorted(world.takeovers, key=lambda t: t.position):
        if t.position <= memory.cursor or not scope.covers(t.project):
            continue
        n = issue_number(t.issue)
        if n is not None and n in github:
            out.steps.append(GhComment(n, texts.audit_comment(scope.repo, t)))
            out.remember(Audited, position=t.position, n=n)
            cursor = t.position
        elif n is not None:
            skipped.add(t.issue)
    # Past every release read when there is a record to write anyway, or when many were read
    # (so the next sync does not read them again); else past the last takeover handled.
    last = max((t.position for t in world.takeovers), default=0)
    if world.takeovers or world.releases_read >= REREAD:
        last = max(last, world.released_to)
    if last > cursor:
        out.remember(Passed, position=last)
    return Plan(tuple(out.steps), tuple(sorted(skipped)), tuple(not_held))


class _Steps:
    """The steps so far; records are numbered on from the memory's last."""

    def __init__(self, seq: int) -> None:
        self.steps: list[Step] = []
        self._seq = seq

    def remember(self, kind: type[Record], **fields: Any) -> None:
        self._seq += 1
        self.steps.append(Remember(kind(seq=self._seq, **fields)))


def wants_detail(t: Takeover, github: Mapping[int, GitHubIssue], memory: Memory, scope: Scope) -> bool:
    """Whether the plan will comment on ``t`` (so the runner reads its holders and note)."""
    n = issue_number(t.issue)
    return t.position > memory.cursor and scope.covers(t.project) and n is not None and n in github


def _releases(leases: list[Lease], github: Mapping[int, GitHubIssue], memory: Memory) -> list[Release]:
    """The holds whose issue no longer shows a WIP label a person put there (or is not open)."""
    by_session: dict[str, list[Lease]] = defaultdict(list)
    for lease in leases:
        if lease.is_hold:
            by_session[lease.session_id].append(lease)
    out = []
    for sid, held in sorted(by_session.items()):
        numbers = {issue_number(lease.issue) for lease in held}
        if all(n is None or n not in github or not _marked_by_a_person(n, github[n], memory) for n in numbers):
            n = min((x for x in numbers if x is not None), default=0)
            out.append(Release(n, sid, held[0].actor_key, tuple(sorted(lease.issue for lease in held))))
    return out


def _people(n: int, issue: GitHubIssue, memory: Memory) -> list[str]:
    """The assignees a person put on the issue (not the mirror)."""
    return sorted(a for a in issue.assignees if not memory.owns_assignee(n, a))


def _marked_by_a_person(n: int, issue: GitHubIssue, memory: Memory) -> bool:
    return WIP in issue.labels and not memory.owns_label(n, WIP)


def _holds(
    world: Coordination,
    github: Mapping[int, GitHubIssue],
    memory: Memory,
    scope: Scope,
    live: list[Lease],
    keys: Mapping[int, set[str]],
    queued: Mapping[str, str],
) -> tuple[list[Hold], list[str]]:
    """A hold for each issue a person marked WIP whose assignee has no live session."""
    holds: list[Hold] = []
    not_held: list[str] = []
    people_at_work = {scope.logins.login_of(a) for a in world.live_actors if not a.startswith(HOLD_PREFIX)} - {None}
    projects = {lease.issue: lease.project for lease in live} | dict(queued)
    leased = {lease.issue for lease in live}
    for n, issue in sorted(github.items()):
        if not _marked_by_a_person(n, issue, memory):
            continue
        people = _people(n, issue, memory)
        if not people:
            not_held.append(f"#{n}: WIP without an assignee")
            continue
        if any(p in people_at_work for p in people):
            continue  # the person works through a session of their own
        names = sorted(keys.get(n, ())) or ([f"{scope.project}-{n}"] if scope.project else [])
        if not names:
            not_held.append(f"#{n}: no eventcoord issue key is known for it (pass --project)")
            continue
        if any(k in leased or k in world.declared for k in names):
            continue  # not free: a lease (an agent's is reported as a conflict) or a live declaration
        claims = tuple((projects.get(k) or scope.project or "", k) for k in names)
        if any(not project for project, _ in claims):
            not_held.append(f"#{n}: the project of {names[0]} is unknown (pass --project)")
            continue
        holds.append(Hold(n, people[0], claims))
    return holds, not_held


def _edit(
    out: _Steps,
    n: int,
    issue: GitHubIssue,
    memory: Memory,
    scope: Scope,
    leases: list[Lease],
    waiting: bool,
) -> None:
    """Move the issue's labels and assignees to what its leases and queue say."""
    working = [lease for lease in leases if lease.shows_wip]
    want_labels = {WIP} if working else ({QUEUED} if waiting else set())
    want_people = {scope.logins.login_of(lease.actor_key) for lease in working} - {None}
    owned_labels = {label for label in MIRRORED_LABELS if memory.owns_label(n, label)}
    owned_people = {a for (m, a) in memory.assignees if m == n}
    add_labels = sorted(want_labels - issue.labels)
    add_people = sorted(p for p in want_people - issue.assignees if p is not None)
    drop_labels = sorted((owned_labels & issue.labels) - want_labels)
    drop_people = sorted((owned_people & issue.assignees) - want_people)
    for label in add_labels:
        if label not in owned_labels:
            out.remember(Added, n=n, label=label)
    for login in add_people:
        if login not in owned_people:
            out.remember(Added, n=n, assignee=login)
    if add_labels or add_people or drop_labels or drop_people:
        out.steps.append(GhEdit(n, tuple(add_labels), tuple(drop_labels), tuple(add_people), tuple(drop_people)))
    # Taken back by the write above, or gone already (a person removed it): forget it.
    for label in sorted(owned_labels - want_labels):
        out.remember(Removed, n=n, label=label)
    for login in sorted(owned_people - want_people):
        out.remember(Removed, n=n, assignee=login)


def _conflicts(
    out: _Steps,
    n: int,
    issue: GitHubIssue,
    memory: Memory,
    scope: Scope,
    leases: list[Lease],
) -> None:
    """A person's WIP on an issue a live agent holds: tell the agent and the issue, once."""
    if not _marked_by_a_person(n, issue, memory):
        return
    for lease in leases:
        if lease.kind != "agent" or not lease.live:
            continue
        holder_login = scope.logins.login_of(lease.actor_key)
        for login in _people(n, issue, memory):
            fact = (n, lease.issue, lease.session_id, lease.fencing_token, login)
            if login == holder_login or fact in memory.noted:
                continue
            out.steps.append(
                Notify(
                    lease.session_id,
                    texts.conflict_message(scope.repo, n, lease, login),
                    _notice_id(scope.repo, fact),
                )
            )
            out.steps.append(GhComment(n, texts.conflict_comment(scope.repo, lease, login)))
            out.remember(
                Noted,
                n=n,
                issue=lease.issue,
                session_id=lease.session_id,
                fencing_token=lease.fencing_token,
                login=login,
            )


def _notice_id(repo: str, fact: tuple[int, str, str, int, str]) -> str:
    """One message per conflict, however often a sync is run again."""
    digest = hashlib.sha256(repr((repo.lower(), *fact)).encode()).hexdigest()[:32]
    return f"github-mirror:notice:{digest}"
