"""A model of both sides of the GitHub mirror, in memory, that runs a plan's steps as the real
runner would: ``gh`` writes change the issues, records fold into the memory, holds become
human leases, a notice with a ``command_id`` already seen is not sent again (as the server
replays it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from eventcoord.github import memory as mem
from eventcoord.github.model import (
    Coordination,
    GhComment,
    GhEdit,
    GitHubIssue,
    Hold,
    Lease,
    Notify,
    Release,
    Remember,
    Scope,
    Step,
)
from eventcoord.github.names import hold_actor
from eventcoord.github.plan import plan


@dataclass
class Issue:
    labels: set[str]
    assignees: set[str]
    comments: list[str] = field(default_factory=list)


@dataclass
class World:
    """GitHub's open issues, eventcoord's state and the mirror's memory."""

    issues: dict[int, Issue]
    coordination: Coordination
    records: list[mem.AnyRecord] = field(default_factory=list)
    start: mem.Memory = field(default_factory=mem.Memory)
    notices: dict[str, str] = field(default_factory=dict)
    sessions: int = 0

    def github(self) -> dict[int, GitHubIssue]:
        return {n: GitHubIssue(n, frozenset(i.labels), frozenset(i.assignees)) for n, i in self.issues.items()}

    def memory(self) -> mem.Memory:
        return mem.fold(self.records, self.start)

    def plan(self, scope: Scope) -> tuple[Step, ...]:
        return plan(self.coordination, self.github(), self.memory(), scope).steps

    def run(self, steps: Sequence[Step]) -> None:
        for step in steps:
            self.step(step)

    def step(self, step: Step) -> None:
        c = self.coordination
        match step:
            case GhEdit(number=n):
                issue = self.issues[n]
                issue.labels |= set(step.add_labels)
                issue.labels -= set(step.remove_labels)
                issue.assignees |= set(step.add_assignees)
                issue.assignees -= set(step.remove_assignees)
            case GhComment(number=n, body=body):
                self.issues[n].comments.append(body)
            case Remember(record=record):
                assert record.seq == self.memory().seq + 1, "records are numbered one after another"
                self.records.append(record)  # type: ignore[arg-type]
            case Notify(session_id=sid, body=body, command_id=cid):
                self.notices.setdefault(cid, f"{sid}: {body}")
            case Hold(login=login, claims=claims):
                self.sessions += 1
                sid = f"hold-{self.sessions}"
                held = tuple(
                    Lease(
                        issue=k,
                        project=p,
                        session_id=sid,
                        actor_key=hold_actor(login),
                        fencing_token=1,
                        live=True,
                        kind="human",
                    )
                    for p, k in claims
                )
                self.coordination = replace(c, leases=c.leases + held, live_actors=c.live_actors | {hold_actor(login)})
            case Release(session_id=sid):
                self.coordination = replace(c, leases=tuple(x for x in c.leases if x.session_id != sid))

    def shown(self) -> dict[int, tuple[frozenset[str], frozenset[str], tuple[str, ...]]]:
        """What a person sees on each issue."""
        return {n: (frozenset(i.labels), frozenset(i.assignees), tuple(i.comments)) for n, i in self.issues.items()}
