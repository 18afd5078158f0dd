"""One sync: read GitHub (first: a ``gh`` that fails writes nothing), read eventcoord, plan,
then render the ``gh`` calls or apply every step in order, stopping at the first failure."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from eventcoord.client import Client, Contended, InvalidRequest, NotCurrent, Refused
from eventcoord.github import gh, snapshot
from eventcoord.github import memory as mem
from eventcoord.github.model import GhComment, GhEdit, Hold, Notify, Plan, Release, Remember, Scope, Step
from eventcoord.github.names import hold_actor, memory_channel
from eventcoord.github.plan import plan


class StepFailed(Exception):
    """A step of an applied plan failed; nothing after it ran."""

    def __init__(self, index: int, total: int, what: str, message: str, code: str | None = None) -> None:
        super().__init__(f"step {index} of {total} failed: {what}: {message}")
        self.code = code


class UntrustedToken(Exception):
    """The token's records would not count as the mirror's (it is neither human nor admin)."""


@dataclass
class Tally:
    """What one sync did (or, rendered, would do)."""

    edits: int = 0
    comments: int = 0
    holds: int = 0
    releases: int = 0
    notices: int = 0
    records: int = 0
    not_held: list[str] = field(default_factory=list)


def describe(repo: str, step: Step) -> str:
    """One line naming a step (a ``gh`` call as its argv)."""
    match step:
        case GhEdit() | GhComment():
            return json.dumps(gh.write_argv(repo, step))
        case Remember(record=record):
            return f"post_message {memory_channel(repo)} {mem.encode(record)}"
        case Notify(session_id=sid):
            return f"post_message agent:{sid}"
        case Hold(number=n, login=login, claims=claims):
            return f"hold #{n} for {hold_actor(login)}: claim_issue {' '.join(k for _, k in claims)}"
        case Release(number=n, session_id=sid):
            return f"release the hold on #{n}: end_agent {sid}"
    raise AssertionError(step)


class Mirror:
    """A sync of one repository against one eventcoord server; keeps its memory between passes."""

    def __init__(
        self,
        client: Client,
        scope: Scope,
        out: TextIO | None = None,
        err: TextIO | None = None,
        hold_retry: float = 0.0,
    ) -> None:
        self.client = client
        self.scope = scope
        self.channel = memory_channel(scope.repo)
        self.memory = mem.Memory()
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._checked_token = False
        # A hold the service refused (the project is at its WIP limit, say) is tried again only
        # this many seconds later, so a follower does not register a session on every change.
        self.hold_retry = hold_retry
        self._refused: dict[tuple[int, str], float] = {}

    def plan(self) -> Plan:
        """Read both sides (GitHub first) and plan."""
        github = gh.open_issues(self.scope.repo)
        self.memory = snapshot.read_memory(self.client, self.channel, self.memory)
        world = snapshot.read_coordination(self.client, self.scope, self.memory, github)
        return plan(world, github, self.memory, self.scope)

    def render(self, p: Plan) -> Tally:
        """Print each ``gh`` write as one JSON argv per line; run nothing."""
        for step in p.gh_writes:
            print(json.dumps(gh.write_argv(self.scope.repo, step)), file=self.out, flush=True)
        return self._tally(p.steps, p)

    def apply(self, p: Plan) -> Tally:
        """Run every step in order; StepFailed at the first that fails."""
        done: list[Step] = []
        tally = Tally(not_held=list(p.not_held))
        for i, step in enumerate(p.steps, 1):
            try:
                note = self._run(step)
            except gh.GhFailed as e:
                raise StepFailed(i, len(p.steps), describe(self.scope.repo, step), e.message) from e
            except Refused as e:
                if e.status in (401, 403):
                    raise
                raise StepFailed(i, len(p.steps), describe(self.scope.repo, step), str(e), e.code) from e
            if note:
                tally.not_held.append(note)
            else:
                done.append(step)
        return self._tally(done, p, tally)

    def _run(self, step: Step) -> str | None:
        """Make one step; a note when a hold could not be taken (a race, not a failure)."""
        repo = self.scope.repo
        match step:
            case GhEdit() | GhComment():
                gh.run(gh.write_argv(repo, step))
            case Remember(record=record):
                answer = self.client.post_message(
                    channel=self.channel, body=mem.encode(record), command_id=mem.command_id(self.channel, record.seq)
                )
                self._check_token(answer.position)
            case Notify(session_id=sid, body=body, command_id=cid):
                self.client.post_message(channel=f"agent:{sid}", body=body, command_id=cid)
            case Hold():
                return self._hold(step)
            case Release(session_id=sid):
                with contextlib.suppress(NotCurrent):  # already ended: the hold is gone either way
                    self.client.end_agent(session_id=sid, handoff_note="the WIP label was removed on GitHub")
        return None

    def _hold(self, step: Hold) -> str | None:
        key = (step.number, step.login)
        since = self._refused.get(key)
        if since is not None and time.monotonic() - since < self.hold_retry:
            return f"#{step.number}: not held for {step.login} yet (refused lately; tried again later)"
        session = self.client.register_agent(actor=hold_actor(step.login), kind="human", host="github")
        for project, issue in step.claims:
            try:
                self.client.claim_issue(session_id=session.session_id, project=project, issue=issue)
            except (Contended, InvalidRequest) as e:
                self.client.end_agent(session_id=session.session_id)
                self._refused[key] = time.monotonic()
                return f"#{step.number}: not held for {step.login}: {issue}: {e.code} {e.message}"
        self._refused.pop(key, None)
        return None

    def _check_token(self, position: int) -> None:
        """Once: the record just posted counts as the mirror's (a human or admin token posted it)."""
        if self._checked_token:
            return
        page = self.client.read_messages(channel=self.channel, after=position - 1, limit=1).messages
        if not page or not mem.trusted(page[0].session_id, page[0].actor_key):
            poster = page[0].actor_key if page else "nobody"
            raise UntrustedToken(
                f"the mirror's memory needs a human or admin token (its records were posted as {poster})"
            )
        self._checked_token = True

    def _tally(self, steps: list[Step] | tuple[Step, ...], p: Plan, tally: Tally | None = None) -> Tally:
        t = tally or Tally(not_held=list(p.not_held))
        for s in steps:
            match s:
                case GhEdit():
                    t.edits += 1
                case GhComment():
                    t.comments += 1
                case Hold():
                    t.holds += 1
                case Release():
                    t.releases += 1
                case Notify():
                    t.notices += 1
                case Remember():
                    t.records += 1
        return t

    def summary(self, p: Plan, t: Tally, rendered: bool) -> None:
        """One line on stderr (then the reasons issues marked WIP got no hold)."""
        verbs = ("would take", "would release", "would notify", "would remember")
        if not rendered:
            verbs = ("took", "released", "notified", "remembered")
        writes = t.edits + t.comments
        parts = [
            f"{'rendered' if rendered else 'applied'} {_n(writes, 'gh write')} "
            f"({_n(t.edits, 'edit')}, {_n(t.comments, 'comment')})",
            f"{verbs[0]} {_n(t.holds, 'hold')}, {verbs[1]} {t.releases}, {verbs[2]} {_n(t.notices, 'agent')}, "
            f"{verbs[3]} {_n(t.records, 'record')}",
            f"skipped {_n(len(p.skipped), 'issue key')} with no open GitHub issue",
        ]
        line = f"github sync {self.scope.repo}: " + "; ".join(parts)
        if p.skipped:
            line += ": " + ", ".join(p.skipped[:20]) + (" …" if len(p.skipped) > 20 else "")
        print(line, file=self.err, flush=True)
        for note in t.not_held:
            print(f"  not held: {note}", file=self.err, flush=True)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
