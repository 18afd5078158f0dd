"""Handlers of file claims: lock the workspace, load the live claims that could overlap
(``reads/files.py``), decide.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, text

from eventcoord.commands import ClaimFiles, ReleaseFiles
from eventcoord.context import Context, Decision
from eventcoord.domain import files as domain
from eventcoord.domain.handoff import hand_off_files
from eventcoord.domain.paths import DECISION_STEPS, Work
from eventcoord.domain.sessions import Claimant, SessionState, claimant
from eventcoord.errors import DomainError
from eventcoord.handlers.common import (
    SESSION_COLUMNS,
    load_session,
    load_sessions,
    own_session,
)
from eventcoord.handlers.waits import join_line
from eventcoord.projections.files import PG_ISSUE_KEY, issue_key
from eventcoord.reads.files import (
    CLAIM_COLUMNS,
    CLAIM_SELECT,
    PROBED,
    candidates,
    claim_row,
    live_claims_between,
    lock_held,
    lock_workspace,
    overlap_candidates,
    overlap_probes,
)
from eventcoord.reads.waits import load_files_line
from eventcoord.store.postgres import rows_ahead
from eventcoord.store.postgres.ahead import declared_ahead
from eventcoord.store.postgres.rows_ahead import RowsAhead
from eventcoord.store.prepared import Prepared

_SESSION_ALONE = (
    " FROM (SELECT 1) AS one LEFT JOIN sessions AS s"
    # by its id alone (the primary key), as load_session reads it
    " ON s.session_id = CAST(:sid AS text) AND (s.workspace || '') = :ws"
)
_SESSION_SELECT = ", ".join(f"s.{c.name}" for c in SESSION_COLUMNS)
#: PostgreSQL, once the batch holds the workspace's lock: the caller's session and the
#: probes in one round trip, a row per candidate with the session on each (one row, the
#: candidate's columns NULL, when there is none).
_SESSION_AND_PROBES = Prepared(
    lambda d: text(
        f"SELECT {_SESSION_SELECT}, {CLAIM_COLUMNS}{_SESSION_ALONE}"
        f" LEFT JOIN LATERAL (SELECT {CLAIM_COLUMNS} FROM {PROBED}) AS c ON true"
    ),
    session_row="sid",
    rows={"file_claims": ("spans",)},
    reads=("sessions", "file_claims"),
)


#: PostgreSQL, once the batch holds the workspace's lock: what ``_SESSION_AND_PROBES`` reads,
#: for many claims at once (``ws`` and ``sid`` a pair per claim; ``lo`` and ``hi`` its
#: probes, ``rn`` whose each is): a row per candidate, led by the claim's ordinal and its
#: session, or one row with the candidate's columns NULL (``rows_ahead``, ``many``).
_CLAIMS_AHEAD = Prepared(
    lambda d: text(
        f"SELECT q.n, {_SESSION_SELECT}, {CLAIM_COLUMNS}"
        " FROM unnest(CAST(:ws AS text[]), CAST(:sid AS text[])) WITH ORDINALITY AS q(ws, sid, n)"
        # by its id alone (the primary key), as load_session reads it
        " LEFT JOIN LATERAL (SELECT * FROM sessions AS s WHERE s.session_id = q.sid AND (s.workspace || '') = q.ws"
        " OFFSET 0) AS s ON true"
        # the claim's own probes only (``OFFSET 0``: picked out before they are probed)
        f" LEFT JOIN LATERAL (SELECT {CLAIM_COLUMNS} FROM (SELECT r.lo, r.hi FROM unnest(CAST(:rn AS bigint[]),"
        " CAST(:lo AS text[]), CAST(:hi AS text[])) AS r(n, lo, hi) WHERE r.n = q.n OFFSET 0) AS r"
        f" CROSS JOIN LATERAL ({live_claims_between('r.lo', 'r.hi')}) AS c)"
        " AS c ON true"
        " ORDER BY q.n"
    ),
    reads=("sessions", "file_claims"),
)


def claim_rows_ahead(workspace: str, cmd: ClaimFiles) -> RowsAhead | None:
    """What a claim reads once its workspace's lock is held (its session and the claims its
    paths may overlap), which a PostgreSQL batch may read ahead for all its claims
    (``store/postgres/rows_ahead.py``); None: it reads every live claim, or its paths are refused."""
    try:
        paths = domain.normalise_paths(cmd.paths)
    except DomainError:
        return None
    ranges = overlap_probes(workspace, paths)
    if ranges is None:
        return None
    return RowsAhead(
        _CLAIMS_AHEAD,
        (("ws", workspace), ("sid", cmd.session_id), ("lo", tuple(ranges["lo"])), ("hi", tuple(ranges["hi"]))),
        (("sessions", (cmd.session_id,)), ("file_claims", (ranges["spans"],))),
        ("workspaces", workspace),
        spread=("lo", "hi"),
        many=True,
    )


def _session_in(ctx: Context, row: Sequence[Any]) -> SessionState | None:
    """The caller's session from a row that leads with ``SESSION_COLUMNS`` after a LEFT JOIN
    (None: no such session), as :func:`load_session` returns it."""
    return own_session(ctx, row[: len(SESSION_COLUMNS)]) if row[0] is not None else None


def _session_and_candidates(
    conn: Connection, ctx: Context, session_id: str | None, paths: Iterable[str]
) -> tuple[SessionState | None, list[domain.ClaimRow]] | None:
    """PostgreSQL, once the batch holds the workspace's lock: the caller's session (as
    :func:`load_session` reads it) and :func:`overlap_candidates`, in one round trip (None:
    read them apart, as a '' prefix reads every live claim)."""
    ranges = overlap_probes(ctx.workspace, paths)
    if ranges is None:
        return None
    params = {"sid": session_id, "ws": ctx.workspace, **ranges}
    return _session_and_claims(ctx, _SESSION_AND_PROBES.rows(conn, params))


def _session_and_claims(
    ctx: Context, rows: Sequence[Sequence[Any]]
) -> tuple[SessionState | None, list[domain.ClaimRow]]:
    """The session and the candidates from rows that lead with ``SESSION_COLUMNS`` (one row,
    the candidate's columns NULL, when there is none)."""
    width = len(SESSION_COLUMNS)
    return _session_in(ctx, rows[0]), candidates(r[width:] for r in rows if r[width] is not None)


def _read_ahead(
    conn: Connection, ctx: Context, cmd: ClaimFiles
) -> tuple[SessionState | None, list[domain.ClaimRow]] | None:
    """The claim's session and candidates as the batch read them ahead, if they still hold."""
    wanted = declared_ahead(conn, _CLAIMS_AHEAD)
    if wanted is None or cmd.session_id in rows_ahead.revived(conn):
        return None  # a sign of life since: its session's row is not what it read
    rows = rows_ahead.read(conn, wanted)
    return None if rows is None else _session_and_claims(ctx, rows)


def claim_files(conn: Connection, ctx: Context, cmd: ClaimFiles) -> Decision:
    paths = domain.normalise_paths(cmd.paths)  # 422 before anything is read or locked
    both = None
    if lock_held(conn, ctx):  # the batch took the lock: read ahead for it, or both at once
        both = _read_ahead(conn, ctx, cmd) or _session_and_candidates(conn, ctx, cmd.session_id, paths)
    if both is not None:  # the batch took the lock for an earlier command: read both at once
        session, held = both
        claimant(cmd.session_id, session, ctx)
    else:
        session = load_session(conn, ctx, cmd.session_id) if cmd.session_id else None
        claimant(cmd.session_id, session, ctx)  # SESSION_NOT_LIVE before taking the lock
        lock_workspace(conn, ctx)
        held = overlap_candidates(conn, ctx, paths)
    holders = load_sessions(conn, ctx, {h.session_id for h in held if h.session_id is not None})
    work = Work(domain.CLAIM_WORK_LIMIT)  # the claim's checks, then its wait's line and graph
    d = domain.decide_claim_files(domain.ClaimFilesState(session, held, holders, work), cmd, ctx)
    return join_line(conn, ctx, d, work)  # with ``wait``, a refused claim joins the files line


# Unreleased claims of one issue and holder, through the index of an issue's unreleased
# claims only (history of the issue never read). ``IS`` matches a null holder too. On
# PostgreSQL by the issue's live key, the only column named besides the holder, and sorted
# here rather than by the database: with ``workspace = $1 … ORDER BY position, idx`` a
# planner without statistics walked ``ix_file_claims_live_order``, every live claim of the
# workspace, to save sorting a few rows.
_OF_ISSUE_PG = f"{CLAIM_SELECT} WHERE {PG_ISSUE_KEY} = :key AND session_id IS NOT DISTINCT FROM CAST(:sid AS text)"
_OF_ISSUE = Prepared(
    lambda d: (
        text(
            f"{CLAIM_SELECT} INDEXED BY ix_file_claims_issue_live WHERE workspace = :ws AND issue = :issue"
            " AND session_id IS :sid AND released_us IS NULL"
        )
        if d == "sqlite"
        else text(_OF_ISSUE_PG)
    ),
    rows={"file_claims": ("key",)},
    reads=("file_claims",),
)
#: PostgreSQL, once the batch holds the workspace's lock: the caller's session, whether
#: anyone waits for files in the workspace, and the holder's unreleased claims of the
#: issue, in one round trip (a row per claim, or one with the claim's columns NULL). A
#: release of another issue's claims the batch deferred goes with it.
_SESSION_AND_ISSUE_CLAIMS = Prepared(
    lambda d: text(
        f"SELECT {_SESSION_SELECT},"
        " EXISTS (SELECT 1 FROM waits WHERE waits.workspace = :ws AND waits.kind = 'files'),"
        f" {CLAIM_COLUMNS}{_SESSION_ALONE} LEFT JOIN LATERAL ({_OF_ISSUE_PG} OFFSET 0) AS c ON true"
    ),
    session_row="sid",
    rows={"file_claims": ("key",)},
    reads=("sessions", "waits", "file_claims"),
)


#: The same for many releases at once (``ws``, ``sid`` and ``key`` one per release), read
#: ahead for a PostgreSQL batch that holds the workspace's lock: rows led by the release's
#: ordinal (``rows_ahead``, ``many``).
_RELEASES_AHEAD = Prepared(
    lambda d: text(
        f"SELECT q.n, {_SESSION_SELECT},"
        " EXISTS (SELECT 1 FROM waits WHERE waits.workspace = q.ws AND waits.kind = 'files'),"
        f" {CLAIM_COLUMNS}"
        " FROM unnest(CAST(:ws AS text[]), CAST(:sid AS text[]), CAST(:key AS text[])) WITH ORDINALITY"
        " AS q(ws, sid, key, n)"
        # by its id alone (the primary key), as load_session reads it
        " LEFT JOIN LATERAL (SELECT * FROM sessions AS s WHERE s.session_id = q.sid AND (s.workspace || '') = q.ws"
        " OFFSET 0) AS s ON true"
        f" LEFT JOIN LATERAL ({CLAIM_SELECT} WHERE {PG_ISSUE_KEY} = q.key"
        " AND session_id IS NOT DISTINCT FROM q.sid OFFSET 0) AS c ON true"
        " ORDER BY q.n"
    ),
    reads=("sessions", "waits", "file_claims"),
)


def release_rows_ahead(workspace: str, cmd: ReleaseFiles) -> RowsAhead:
    """What a release reads once its workspace's lock is held (its session, whether anyone
    waits for files, its claims of the issue), which a PostgreSQL batch may read ahead for
    all its releases. A wait that starts in the batch (rows not named) forgets it; one that
    ends leaves it answering that someone may wait, which only makes the release look."""
    key = issue_key(workspace, cmd.issue)
    return RowsAhead(
        _RELEASES_AHEAD,
        (("ws", workspace), ("sid", cmd.session_id), ("key", key)),
        (("sessions", (cmd.session_id,)), ("file_claims", (key,)), ("waits", (workspace,))),
        ("workspaces", workspace),
        many=True,
    )


def release_files(conn: Connection, ctx: Context, cmd: ReleaseFiles) -> Decision:
    params = {
        "ws": ctx.workspace,
        "issue": cmd.issue,
        "key": issue_key(ctx.workspace, cmd.issue),
        "sid": cmd.session_id,
    }
    anyone_waits: bool | None = None  # not known: the line is read
    if lock_held(conn, ctx):  # the batch took the lock: read ahead for it, or one round trip
        wanted = declared_ahead(conn, _RELEASES_AHEAD)
        ahead = None
        if wanted is not None and cmd.session_id not in rows_ahead.revived(conn):
            ahead = rows_ahead.read(conn, wanted)
        rows = ahead or _SESSION_AND_ISSUE_CLAIMS.rows(conn, params)
        width = len(SESSION_COLUMNS)
        session = _session_in(ctx, rows[0]) if cmd.session_id else None
        anyone_waits = bool(rows[0][width])
        claims = [r[width + 1 :] for r in rows if r[width + 1] is not None]
    else:
        session = load_session(conn, ctx, cmd.session_id) if cmd.session_id else None
        lock_workspace(conn, ctx)  # a waiter joins under this lock: none can slip past the hand-off
        claims = list(_OF_ISSUE.rows(conn, params))
    claims.sort(key=lambda r: (r[0], r[1]))  # position, idx
    d = domain.decide_release_files(domain.ReleaseFilesState(session, [claim_row(r) for r in claims]), cmd, ctx)
    released = list(d.result["released"])
    if not released or anyone_waits is False:
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
        for h in overlap_candidates(conn, ctx, sorted({p for w in line for p in w.paths}))
        if not (gone(h) and h.path in released)
    ]
    holders = load_sessions(conn, ctx, {h.session_id for h in held if h.session_id is not None})
    served = d.then()
    hand_off_files(served, line, held, holders, Claimant(d.session_id, d.actor_key or "token"), ctx, work)
    return served.decided()
