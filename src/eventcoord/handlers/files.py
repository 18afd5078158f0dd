"""Handlers of file claims: load the caller's session, lock the workspace, load the live
claims that could overlap (``reads/files.py``), decide; a release then hands the freed
paths to the files waiters they unblock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import Connection

from eventcoord.commands import ClaimFiles, ReleaseFiles
from eventcoord.context import Context, Decision
from eventcoord.domain import files as domain
from eventcoord.domain.handoff import hand_off_files
from eventcoord.domain.paths import DECISION_STEPS, Work
from eventcoord.domain.sessions import Claimant
from eventcoord.handlers.waits import join_line
from eventcoord.reads import files as reads
from eventcoord.reads.common import load_sessions
from eventcoord.reads.waits import load_files_line


def claim_files(conn: Connection, ctx: Context, cmd: ClaimFiles) -> Decision:
    paths = domain.normalise_paths(cmd.paths)  # 422 before anything is read or locked
    work = Work(domain.CLAIM_WORK_LIMIT)  # the claim's checks, then its wait's line and graph
    read = reads.claim_state(conn, ctx, cmd.session_id, paths)
    d = domain.decide_claim_files(domain.ClaimFilesState(read.session, read.held, read.holders, work), cmd, ctx)
    return join_line(conn, ctx, d, work)  # with ``wait``, a refused claim joins the files line


def release_files(conn: Connection, ctx: Context, cmd: ReleaseFiles) -> Decision:
    read = reads.release_state(conn, ctx, cmd)
    d = domain.decide_release_files(read.state, cmd, ctx)
    released = list(d.result["released"])
    if not released or not read.anyone_waits:
        return d
    return files_hand_off(conn, ctx, d, released, lambda h: h.issue == cmd.issue and h.session_id == cmd.session_id)


def files_hand_off(
    conn: Connection, ctx: Context, d: Decision, released: Sequence[str], gone: Callable[[domain.ClaimRow], bool]
) -> Decision:
    """The second step of a release: serve the files waiters that ``released`` paths may
    unblock (the workspace is locked), after the decision ``d``."""
    work = Work(DECISION_STEPS)  # choosing the line, then handing off: one decision's steps
    line = load_files_line(conn, ctx, released, work)
    if not line:
        return d
    held = [
        h
        for h in reads.overlap_candidates(conn, ctx, sorted({p for w in line for p in w.paths}))
        if not (gone(h) and h.path in released)
    ]
    holders = load_sessions(conn, ctx, {h.session_id for h in held if h.session_id is not None})
    served = d.then()
    hand_off_files(served, line, held, holders, Claimant(d.session_id, d.actor_key or "token"), ctx, work)
    return served.decided()
