"""File claims: pure decisions over the live claims a handler loaded.

Overlap is ``domain.paths.overlaps`` (exact, never string equality); liveness of a holder
is judged at decision time; the order of events within a command is
docs/protocol.md#file-claim-events.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eventcoord import errors
from eventcoord.commands import ClaimFiles, ReleaseFiles
from eventcoord.context import Context, Decision, Draft
from eventcoord.domain import refusals, streams, waits
from eventcoord.domain.messages import agent_channel, issue_channel, post
from eventcoord.domain.paths import DECISION_STEPS, PathError, Work, WorkExceeded, normalise_path, overlaps
from eventcoord.domain.sessions import Claimant, SessionState, acting, claimant
from eventcoord.events import ClaimConflict, FileClaimReleased, FilesClaimed, WaitStarted

#: The steps of overlap checking one claim_files may take (``paths.Work``), its wait's line
#: and graph included: at most about 35 ms of CPU here, whatever the paths and the live claims.
CLAIM_WORK_LIMIT = DECISION_STEPS
#: What one conflict costs in those steps: its event is built, stored and published (a
#: claim of 100 paths over 100 live claims would otherwise record 10,000 of them).
CONFLICT_STEPS = 100


@dataclass(frozen=True, slots=True)
class ClaimRow:
    """One unreleased file claim, as the read model holds it."""

    position: int
    idx: int
    issue: str
    session_id: str | None
    actor_key: str
    path: str
    exclusive: bool


@dataclass(frozen=True, slots=True)
class ClaimFilesState:
    """What claim_files decides on.

    ``held`` must contain every unreleased claim that could overlap a requested path (a
    superset is fine); ``holders`` the sessions of those claims.
    """

    session: SessionState | None
    held: Sequence[ClaimRow]
    holders: dict[str, SessionState]
    #: The command's steps of overlap checks, shared with its wait's line and graph.
    work: Work = field(default_factory=lambda: Work(CLAIM_WORK_LIMIT))


@dataclass(frozen=True, slots=True)
class ReleaseFilesState:
    """What release_files decides on: the caller and its unreleased claims of the issue.

    ``own`` are the claims of ``cmd.issue`` held by ``cmd.session_id`` (or the
    session-less ones when it is omitted).
    """

    session: SessionState | None
    own: Sequence[ClaimRow]


def normalise_paths(raw: Sequence[str], field: str = "paths") -> list[str]:
    """Normalise and validate every path; duplicates (after normalisation) are dropped.

    The first invalid one is a 422 VALIDATION naming it: ``details.field`` = ``paths[i]``.
    """
    out: list[str] = []
    for i, path in enumerate(raw):
        try:
            norm = normalise_path(path)
        except PathError as e:
            raise errors.invalid(f"{field}[{i}]", f"{field}[{i}]: {e}", e.reason) from None
        if norm not in out:
            out.append(norm)
    return out


def _overlaps(path: str, held: str, work: Work, raw: Sequence[str]) -> bool:
    """Overlap within the command's budget; past it, the claim is refused, naming the limit."""
    try:
        return overlaps(path, held, work)
    except WorkExceeded as e:
        raise _too_complex(path, raw, e.limit) from None


def _charge_conflict(work: Work, path: str, raw: Sequence[str]) -> None:
    try:
        work.charge(CONFLICT_STEPS)
    except WorkExceeded as e:
        raise _too_complex(path, raw, e.limit) from None


def _too_complex(path: str, raw: Sequence[str], limit: int) -> errors.ValidationFailed:
    index = next((i for i, p in enumerate(raw) if normalise_path(p) == path), 0)
    return errors.invalid(
        f"paths[{index}]",
        f"paths[{index}]: deciding this claim against the live claims it may overlap (and recording its conflicts) "
        f"takes more than {limit:,} steps, the limit of one command; claim fewer paths at once, or narrower patterns",
        "too_complex",
    )


def holder_is_live(claim: ClaimRow, holders: dict[str, SessionState], ctx: Context) -> bool:
    """A claim without a session never expires; otherwise its session must be live."""
    if claim.session_id is None:
        return True
    s = holders.get(claim.session_id)
    return s is not None and ctx.is_live(s.last_seen_us, s.ended_us)


def conflict_details(path: str, h: ClaimRow) -> dict[str, Any]:
    """One entry of FILES_CLAIMED ``details.conflicts`` and of the ``overridden`` result."""
    return {
        "path": path,
        "holder_path": h.path,
        "holder_issue": h.issue,
        "holder_session_id": h.session_id,
        "holder_actor_key": h.actor_key,
    }


def _who(c: Claimant) -> str:
    return f"session {c.session_id} ({c.actor_key})" if c.session_id else f"{c.actor_key} (no session)"


def _group(claims: Iterable[ClaimRow]) -> dict[tuple[str, str | None], list[ClaimRow]]:
    """Claims grouped by holder (issue, session), in first-seen order, each claim once."""
    groups: dict[tuple[str, str | None], list[ClaimRow]] = {}
    for h in claims:
        group = groups.setdefault((h.issue, h.session_id), [])
        if h not in group:
            group.append(h)
    return groups


def _paths_of(claims: Iterable[ClaimRow]) -> list[str]:
    return list(dict.fromkeys(h.path for h in claims))


def decide_claim_files(state: ClaimFilesState, cmd: ClaimFiles, ctx: Context) -> Decision:
    """claim_files: all-or-nothing, exclusive/shared, stale holders expire, force overrides.

    The caller's own claims (same issue and same session) never conflict; an identical
    own path in the same mode is already held and is not recorded again; in the other
    mode it is released and claimed anew.
    """
    held, holders = state.held, state.holders
    paths = normalise_paths(cmd.paths)
    me = claimant(cmd.session_id, state.session, ctx)
    d = Draft(session_id=me.session_id, actor_key=me.actor_key)

    def own(h: ClaimRow) -> bool:
        return h.issue == cmd.issue and h.session_id == me.session_id

    already = {h.path for h in held if own(h) and h.exclusive == cmd.exclusive}
    remode = [h for h in held if own(h) and h.exclusive != cmd.exclusive and h.path in paths]
    new = [p for p in paths if p not in already]

    expired: list[ClaimRow] = []
    contended: list[tuple[str, ClaimRow]] = []
    work = state.work
    for path in new:
        for h in held:
            if own(h) or not (cmd.exclusive or h.exclusive) or not _overlaps(path, h.path, work, cmd.paths):
                continue
            if holder_is_live(h, holders, ctx):
                _charge_conflict(work, path, cmd.paths)
                contended.append((path, h))
            elif h not in expired:
                expired.append(h)

    def conflict(path: str, h: ClaimRow) -> ClaimConflict:
        return ClaimConflict(
            path=path,
            issue=cmd.issue,
            session_id=me.session_id,
            holder_path=h.path,
            holder_issue=h.issue,
            holder_session_id=h.session_id,
            forced=cmd.force,
            actor_key=me.actor_key,
            holder_actor_key=h.actor_key,
        )

    if contended and not cmd.force:
        # All-or-nothing: the denials are kept as facts; nothing else is written
        # (not even the expiry of stale holders: a refused claim changes nothing).
        for path, h in contended:
            d.add(streams.files(cmd.issue), conflict(path, h))
        d.error = refusals.files_claimed([conflict_details(path, h) for path, h in contended])
        if cmd.wait and state.session is not None:  # the handler then joins the files line (docs/protocol.md#waiting)
            started = WaitStarted(
                kind="files",
                key=new[0],
                session_id=me.session_id or "",
                actor_key=me.actor_key,
                issue=cmd.issue,
                paths=new,
                exclusive=cmd.exclusive,
            )
            holders_live = sorted({h.session_id for _, h in contended if h.session_id is not None})
            return waits.asks_to_join(d, started, d.error, holders_live, None)
        return d.decided()

    # 1. releases: stale holders (silently), displaced holders, own claims changing mode
    for (issue, sid), claims in _group(expired).items():
        d.add(
            streams.files(issue),
            FileClaimReleased(
                issue=issue, session_id=sid, paths=_paths_of(claims), reason="expired", by_session_id=me.session_id
            ),
        )
    displaced = _group(h for _, h in contended)
    for (issue, sid), claims in displaced.items():
        d.add(
            streams.files(issue),
            FileClaimReleased(
                issue=issue, session_id=sid, paths=_paths_of(claims), reason="overridden", by_session_id=me.session_id
            ),
        )
    if remode:
        d.add(
            streams.files(cmd.issue),
            FileClaimReleased(issue=cmd.issue, session_id=me.session_id, paths=_paths_of(remode), reason="released"),
        )
    # 2. conflicts (forced), 3. the grant, 4. messages
    for path, h in contended:
        d.add(streams.files(cmd.issue), conflict(path, h))
    if new:
        d.add(
            streams.files(cmd.issue),
            FilesClaimed(
                issue=cmd.issue, session_id=me.session_id, actor_key=me.actor_key, paths=new, exclusive=cmd.exclusive
            ),
        )
    for (issue, sid), claims in displaced.items():
        pairs = [(p, h) for p, h in contended if h in claims]
        _notify_displaced(d, cmd.issue, me, issue, sid, claims[0].actor_key, pairs)
    d.result = {
        "claimed": paths,
        "exclusive": cmd.exclusive,
        "already_held": [p for p in paths if p in already],
        "overridden": [conflict_details(p, h) for p, h in contended],
        "expired": [
            {"holder_path": h.path, "holder_issue": h.issue, "holder_session_id": h.session_id} for h in expired
        ],
    }
    return d.decided()


def _notify_displaced(
    d: Draft,
    claiming_issue: str,
    me: Claimant,
    issue: str,
    sid: str | None,
    actor: str,
    pairs: list[tuple[str, ClaimRow]],
) -> None:
    """The audit record on the claiming issue, and the displaced session's own notice."""
    overlaps_text = "; ".join(f"{h.path} (overlaps {p})" for p, h in pairs)
    holder = f"session {sid} ({actor})" if sid else f"{actor} (no session)"
    post(
        d,
        issue_channel(claiming_issue),
        me,
        f"Claimed with force for issue {claiming_issue} by {_who(me)}, displacing issue {issue} held by {holder}: "
        f"{overlaps_text}",
    )
    if sid is not None:
        post(
            d,
            agent_channel(sid),
            me,
            f"Your file claim for issue {issue} was overridden by {_who(me)}, which claimed with force for issue "
            f"{claiming_issue}: {overlaps_text}",
        )


def decide_release_files(state: ReleaseFilesState, cmd: ReleaseFiles, ctx: Context) -> Decision:
    """release_files: the named paths (as normalised strings) or, with none, all of them.

    Paths not held are ignored.
    """
    own = state.own
    wanted = set(normalise_paths(cmd.paths)) if cmd.paths else None
    me = acting(cmd.session_id, state.session, ctx)
    d = Draft(session_id=me.session_id, actor_key=me.actor_key)
    released = _paths_of(h for h in own if wanted is None or h.path in wanted)
    if released:
        d.add(
            streams.files(cmd.issue),
            FileClaimReleased(issue=cmd.issue, session_id=me.session_id, paths=released, reason="released"),
        )
    d.result = {"released": released}
    return d.decided()
