"""PostgreSQL's read-ahead of the file commands, and the loaders that use it.

A batch locks the workspaces' rows of its claims and releases ahead, then reads each one's
session and candidate claims (a release's: its claims of the issue, and whether anyone
waits) in one statement for them all; the substitutes here build the same states as
``reads.files``' loaders from those rows, or read both in one round trip once the lock is held.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, text

from eventcoord.commands import ClaimFiles, ReleaseFiles
from eventcoord.context import Context
from eventcoord.domain import files as domain
from eventcoord.domain.sessions import SessionState, claimant
from eventcoord.errors import DomainError
from eventcoord.projections.files import PG_ISSUE_KEY, issue_key
from eventcoord.reads import files as reads
from eventcoord.reads.common import SESSION_COLUMNS, own_session
from eventcoord.reads.files import (
    CLAIM_COLUMNS,
    CLAIM_SELECT,
    OF_ISSUE_PG,
    PROBED,
    candidates,
    live_claims_between,
    overlap_probes,
)
from eventcoord.store.loaders import substitute
from eventcoord.store.postgres import held_locks, rows_ahead
from eventcoord.store.postgres.ahead import declared_ahead
from eventcoord.store.postgres.rows_ahead import RowsAhead
from eventcoord.store.prepared import Prepared

#: PostgreSQL: the rows of many workspaces locked at once for a batch (``ws``; ``key`` is
#: unused), in name order, skipping any another transaction holds (its claims then lock it
#: themselves, and wait as they always did). A workspace without a row is left to its
#: commands, which insert it. Its rows are the workspaces it holds afterwards.
_WORKSPACES_AHEAD = Prepared(
    lambda d: text(
        "SELECT name FROM workspaces WHERE name = ANY(CAST(:ws AS text[])) ORDER BY name FOR UPDATE SKIP LOCKED"
    ),
    reads=("workspaces",),
)


def workspace_lock_ahead(workspace: str) -> held_locks.GuardLock:
    """What a command that first locks its workspace's row (``lock_workspace``) can have
    locked ahead by a PostgreSQL batch."""
    return held_locks.GuardLock(_WORKSPACES_AHEAD, workspace, "", table="workspaces")


def _workspace_lock(ctx: Context) -> held_locks.Lock:
    return ("workspaces", ctx.workspace)


def lock_held(conn: Connection, ctx: Context) -> bool:
    """Whether the running fast pass holds the workspace's lock already."""
    return held_locks.held(conn, _workspace_lock(ctx))


@substitute(reads.lock_workspace)
def lock_workspace(conn: Connection, ctx: Context) -> None:
    """:func:`reads.files.lock_workspace`; a batch's fast pass that holds it already sends nothing."""
    if lock_held(conn, ctx):
        return
    reads.lock_workspace.plain(conn, ctx)
    held_locks.hold(conn, _workspace_lock(ctx))


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
    conn: Connection, ctx: Context, session_id: str | None
) -> tuple[SessionState | None, list[domain.ClaimRow]] | None:
    """The claim's session and candidates as the batch read them ahead, if they still hold."""
    wanted = declared_ahead(conn, _CLAIMS_AHEAD)
    if wanted is None or session_id in rows_ahead.revived(conn):
        return None  # a sign of life since: its session's row is not what it read
    rows = rows_ahead.read(conn, wanted)
    return None if rows is None else _session_and_claims(ctx, rows)


#: PostgreSQL, once the batch holds the workspace's lock: the caller's session, whether
#: anyone waits for files in the workspace, and the holder's unreleased claims of the
#: issue, in one round trip (a row per claim, or one with the claim's columns NULL). A
#: release of another issue's claims the batch deferred goes with it.
_SESSION_AND_ISSUE_CLAIMS = Prepared(
    lambda d: text(
        f"SELECT {_SESSION_SELECT},"
        " EXISTS (SELECT 1 FROM waits WHERE waits.workspace = :ws AND waits.kind = 'files'),"
        f" {CLAIM_COLUMNS}{_SESSION_ALONE} LEFT JOIN LATERAL ({OF_ISSUE_PG} OFFSET 0) AS c ON true"
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


@substitute(reads.claim_state)
def claim_state(conn: Connection, ctx: Context, session_id: str | None, paths: Sequence[str]) -> reads.ClaimRead:
    """:func:`reads.files.claim_state`; once the batch holds the workspace's lock, from the
    rows it read ahead for the claim, or both read in one round trip."""
    both = None
    if lock_held(conn, ctx):
        both = _read_ahead(conn, ctx, session_id) or _session_and_candidates(conn, ctx, session_id, paths)
    if both is None:
        return reads.claim_state.plain(conn, ctx, session_id, paths)
    session, held = both
    claimant(session_id, session, ctx)
    return reads.claim_read(conn, ctx, session, held)


@substitute(reads.release_state)
def release_state(conn: Connection, ctx: Context, cmd: ReleaseFiles) -> reads.ReleaseRead:
    """:func:`reads.files.release_state`; once the batch holds the workspace's lock, from the
    rows it read ahead for the release, or read in one round trip, with whether anyone
    waits for files."""
    if not lock_held(conn, ctx):
        return reads.release_state.plain(conn, ctx, cmd)
    wanted = declared_ahead(conn, _RELEASES_AHEAD)
    ahead = None
    if wanted is not None and cmd.session_id not in rows_ahead.revived(conn):
        ahead = rows_ahead.read(conn, wanted)
    rows = ahead or _SESSION_AND_ISSUE_CLAIMS.rows(conn, reads.issue_params(ctx, cmd))
    width = len(SESSION_COLUMNS)
    session = _session_in(ctx, rows[0]) if cmd.session_id else None
    claims = (r[width + 1 :] for r in rows if r[width + 1] is not None)
    return reads.ReleaseRead(reads.release_read(ctx, session, claims), anyone_waits=bool(rows[0][width]))
