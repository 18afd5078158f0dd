"""Handlers of file claims: lock the workspace, load the live claims that could overlap, decide.

On PostgreSQL the workspace row is locked FOR UPDATE before the claims are read, so two
claim_files of one workspace (on any replica) are decided one after the other and never
both grant overlapping exclusive claims. On SQLite the single writer already serialises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, bindparam, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable

from eventcoord.commands import ClaimFiles, ReleaseFiles
from eventcoord.context import Context, Decision
from eventcoord.domain import files as domain
from eventcoord.domain import waits
from eventcoord.domain.handoff import hand_off_files
from eventcoord.domain.paths import DECISION_STEPS, Work, literal_prefix
from eventcoord.domain.sessions import Claimant, SessionState, claimant
from eventcoord.errors import DomainError
from eventcoord.events import WaitStarted
from eventcoord.handlers.common import (
    SESSION_COLUMNS,
    WS,
    declared_ahead,
    load_session,
    load_sessions,
    own_session,
)
from eventcoord.projections.files import PG_ISSUE_KEY, issue_key, live_key
from eventcoord.store import held_locks, rows_ahead
from eventcoord.store.key_spans import KeySpans
from eventcoord.store.prepared import Prepared
from eventcoord.store.rows_ahead import RowsAhead
from eventcoord.store.schema import workspaces

_MAX_CHAR = 0x10FFFF
_MAX_ANCESTORS = 2000


def _insert_workspace(dialect: str) -> Executable:
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(workspaces)
    return insert.values(name=WS, created_us=bindparam("at")).on_conflict_do_nothing()


_INSERT_WORKSPACE = Prepared(_insert_workspace)
_LOCK_WORKSPACE = Prepared(lambda d: select(workspaces.c.name).where(workspaces.c.name == WS).with_for_update())


def _workspace_lock(ctx: Context) -> held_locks.Lock:
    return ("workspaces", ctx.workspace)


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


def _lock_held(conn: Connection, ctx: Context) -> bool:
    """Whether the running PostgreSQL fast pass holds the workspace's lock already."""
    return held_locks.held(conn, _workspace_lock(ctx))


def lock_workspace(conn: Connection, ctx: Context) -> None:
    """Serialise every claim_files of the workspace until commit (PostgreSQL row lock).

    A PostgreSQL batch's fast pass that holds it already sends nothing (``held_locks``).
    SQLite's one writer (``BEGIN IMMEDIATE``, in every process on the file) serialises every
    decision already: nothing is locked there, as for the guards (``lock_guard``).
    """
    if conn.dialect.name == "sqlite" or _lock_held(conn, ctx):
        return
    params = {"ws": ctx.workspace}
    if _LOCK_WORKSPACE.first(conn, params) is None:  # created on first use (the lock row of workspace-wide guards)
        _INSERT_WORKSPACE.run(conn, {"ws": ctx.workspace, "at": ctx.now_us})
        _LOCK_WORKSPACE.first(conn, params)
    held_locks.hold(conn, _workspace_lock(ctx))


def ancestors(prefix: str) -> set[str]:
    """``''`` and every directory prefix of ``prefix``: ``'a/b/c'`` → ``{'', 'a/', 'a/b/'}``."""
    return {""} | {prefix[: i + 1] for i, ch in enumerate(prefix) if ch == "/"}


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string greater than every string starting with ``prefix`` (code point order)."""
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if code <= _MAX_CHAR:
            if 0xD800 <= code <= 0xDFFF:  # surrogates cannot be stored; skip them
                code = 0xE000
            return "".join(chars) + chr(code)
    return None


def starts_with(conn: Connection, column: Any, prefix: str) -> ColumnElement[bool]:
    """``column`` starts with ``prefix``, case-sensitively and exactly, index-friendly.

    SQLite compares text bytewise (BINARY), so a range is exact and uses the index (its
    LIKE would fold ASCII case). PostgreSQL's LIKE is exact under any collation, where a
    range would only be exact under a C collation.
    """
    if conn.dialect.name == "postgresql":
        cond: ColumnElement[bool] = column.startswith(prefix, autoescape=True)
        return cond
    upper = prefix_upper_bound(prefix)
    bounded: ColumnElement[bool] = (column >= prefix) & (column < upper) if upper is not None else column >= prefix
    return bounded


# The overlap candidates are read through the partial index of unreleased claims only, by
# construction (docs/decisions/0006-one-index-per-lookup.md): on SQLite every probe names
# it (``INDEXED BY``: the planner cannot drift to ``ix_file_claims_workspace_time``, which
# holds every claim ever made);
# on PostgreSQL the probes are ranges on ``literal_prefix COLLATE "C"``, an expression only
# ``ix_file_claims_live_c`` (partial, unreleased claims) indexes. Each probe reads only the
# claims whose prefix can overlap, so neither history nor live claims elsewhere in the
# workspace slow a decision down. Asserted on the plans by tests/contract/test_plans.py.
_CLAIM_SELECT = "SELECT position, idx, issue, session_id, actor_key, path, exclusive FROM file_claims"
_LIVE = "workspace = :ws AND released_us IS NULL"
_SQLITE_LIVE = f"{_CLAIM_SELECT} INDEXED BY ix_file_claims_live WHERE {_LIVE}"
_EQ = Prepared(lambda d: text(f"{_SQLITE_LIVE} AND literal_prefix = :p"))
_RANGE = Prepared(lambda d: text(f"{_SQLITE_LIVE} AND literal_prefix >= :lo AND literal_prefix < :hi"))
# Every live claim of the workspace (a '' prefix): on PostgreSQL any index the planner picks
# for ``workspace = … AND released_us IS NULL`` is a partial one of unreleased claims.
_ALL_LIVE = Prepared(lambda d: text(_SQLITE_LIVE if d == "sqlite" else f"{_CLAIM_SELECT} WHERE {_LIVE}"))
# PostgreSQL: one statement, a lateral index probe per (lo, hi) range; an exact prefix p is
# the range [p, p || chr(1)) (text holds no NUL). The probes compare one expression, the
# claim's *live key* ``(CASE WHEN released_us IS NULL THEN workspace || chr(1) ||
# literal_prefix END) COLLATE "C"`` (NULL once released), with bounds that carry the
# workspace, and name no other column, not even ``released_us``: only
# ``ix_file_claims_live_key`` (on exactly that expression, partial: key not null, which a
# comparison implies) can serve them, with or without statistics (0011_one_index_each).
# With ``workspace = $1`` in the probe the planner picked ``ix_file_claims_issue_live`` on a
# table without statistics; with ``released_us IS NULL`` a cached generic plan full-scanned
# it, a partial index of unreleased claims like the probe's own: every live claim per probe.
# ``OFFSET 0`` keeps it from flattening the probes into one join over every live claim.
PG_LIVE_KEY = "((CASE WHEN released_us IS NULL THEN workspace || E'\\x01' || literal_prefix END) COLLATE \"C\")"
_CLAIM_COLUMNS = "c.position, c.idx, c.issue, c.session_id, c.actor_key, c.path, c.exclusive"
_PROBED = (
    "unnest(CAST(:lo AS text[]), CAST(:hi AS text[])) AS r(lo, hi) CROSS JOIN LATERAL ("
    f" {_CLAIM_SELECT} WHERE {PG_LIVE_KEY} >= r.lo AND {PG_LIVE_KEY} < r.hi OFFSET 0) AS c"
)
#: The probes name their rows by the ranges they read (``spans``): a claim's insert the
#: batch deferred, at keys outside them, goes with them (``store/key_spans.py``).
_PG_PROBES = Prepared(
    lambda d: text(f"SELECT {_CLAIM_COLUMNS} FROM {_PROBED}"),
    rows={"file_claims": ("spans",)},
    reads=("file_claims",),
)
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
        f"SELECT {_SESSION_SELECT}, {_CLAIM_COLUMNS}{_SESSION_ALONE}"
        f" LEFT JOIN LATERAL (SELECT {_CLAIM_COLUMNS} FROM {_PROBED}) AS c ON true"
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
        f"SELECT q.n, {_SESSION_SELECT}, {_CLAIM_COLUMNS}"
        " FROM unnest(CAST(:ws AS text[]), CAST(:sid AS text[])) WITH ORDINALITY AS q(ws, sid, n)"
        # by its id alone (the primary key), as load_session reads it
        " LEFT JOIN LATERAL (SELECT * FROM sessions AS s WHERE s.session_id = q.sid AND (s.workspace || '') = q.ws"
        " OFFSET 0) AS s ON true"
        # the claim's own probes only (``OFFSET 0``: picked out before they are probed)
        f" LEFT JOIN LATERAL (SELECT {_CLAIM_COLUMNS} FROM (SELECT r.lo, r.hi FROM unnest(CAST(:rn AS bigint[]),"
        " CAST(:lo AS text[]), CAST(:hi AS text[])) AS r(n, lo, hi) WHERE r.n = q.n OFFSET 0) AS r"
        f" CROSS JOIN LATERAL ({_CLAIM_SELECT} WHERE {PG_LIVE_KEY} >= r.lo AND {PG_LIVE_KEY} < r.hi OFFSET 0) AS c)"
        " AS c ON true"
        " ORDER BY q.n"
    ),
    reads=("sessions", "file_claims"),
)


def claim_rows_ahead(workspace: str, cmd: ClaimFiles) -> RowsAhead | None:
    """What a claim reads once its workspace's lock is held (its session and the claims its
    paths may overlap), which a PostgreSQL batch may read ahead for all its claims
    (``store/rows_ahead.py``); None: it reads every live claim, or its paths are refused."""
    try:
        paths = domain.normalise_paths(cmd.paths)
    except DomainError:
        return None
    probes = _probe_ranges({literal_prefix(p) for p in paths})
    if probes is None:
        return None
    ranges = _pg_probes(workspace, probes)
    return RowsAhead(
        _CLAIMS_AHEAD,
        (("ws", workspace), ("sid", cmd.session_id), ("lo", tuple(ranges["lo"])), ("hi", tuple(ranges["hi"]))),
        (("sessions", (cmd.session_id,)), ("file_claims", (ranges["spans"],))),
        ("workspaces", workspace),
        spread=("lo", "hi"),
        many=True,
    )


def _probe_ranges(prefixes: set[str]) -> tuple[list[str], list[tuple[str, str]]] | None:
    """Exact prefixes (the ancestors) and [lo, hi) ranges (extensions) to probe; None: read all."""
    above = sorted(set().union(*(ancestors(p) for p in prefixes)))
    # A requested '' prefix ('*', '**/x') can overlap anything; absurdly deep paths would
    # need absurdly many probes: both read every unreleased claim.
    if "" in prefixes or len(above) > _MAX_ANCESTORS:
        return None
    ranges: list[tuple[str, str]] = []
    for p in sorted(prefixes):
        if ranges and p.startswith(ranges[-1][0]):
            continue  # inside the range of a shorter requested prefix
        hi = prefix_upper_bound(p)
        if hi is None:
            return None
        ranges.append((p, hi))
    return above, ranges


def _claim_row(r: Any) -> domain.ClaimRow:
    return domain.ClaimRow(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]))


def overlap_candidates(conn: Connection, ctx: Context, paths: Iterable[str]) -> list[domain.ClaimRow]:
    """Unreleased claims of the workspace that could overlap one of ``paths``.

    Two patterns can only overlap when one literal prefix extends the other, so the
    candidates are the claims whose prefix starts with a requested prefix, plus those whose
    prefix is one of its directory ancestors; both are probes of the partial index of
    unreleased claims, so history never slows a decision down, nor do live claims in paths
    that cannot overlap.
    """
    probes = _probe_ranges({literal_prefix(p) for p in paths})
    ws = ctx.workspace
    rows: list[Any] = []
    if probes is None:
        rows = list(_ALL_LIVE.rows(conn, {"ws": ws}))
    elif conn.dialect.name == "postgresql":
        rows = list(_PG_PROBES.rows(conn, _pg_probes(ws, probes)))
    else:
        above, ranges = probes
        for p in above:
            rows.extend(_EQ.rows(conn, {"ws": ws, "p": p}))
        for lo_, hi_ in ranges:
            rows.extend(_RANGE.rows(conn, {"ws": ws, "lo": lo_, "hi": hi_}))
    return _candidates(rows)


def _pg_probes(ws: str, probes: tuple[list[str], list[tuple[str, str]]]) -> dict[str, Any]:
    """The parameters of the PostgreSQL probes: ``lo``, ``hi`` and the ``spans`` they read."""
    above, ranges = probes
    lo = [live_key(ws, p) for p in above] + [live_key(ws, r[0]) for r in ranges]
    hi = [live_key(ws, p + "\x01") for p in above] + [live_key(ws, r[1]) for r in ranges]
    return {"lo": lo, "hi": hi, "spans": KeySpans(zip(lo, hi, strict=True))}


def _candidates(rows: Iterable[Sequence[Any]]) -> list[domain.ClaimRow]:
    """Claims read by overlapping probes, each once, in claim order."""
    unique = {(r[0], r[1]): r for r in rows}
    return [_claim_row(unique[k]) for k in sorted(unique)]


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
    probes = _probe_ranges({literal_prefix(p) for p in paths})
    if probes is None:
        return None
    params = {"sid": session_id, "ws": ctx.workspace, **_pg_probes(ctx.workspace, probes)}
    return _session_and_claims(ctx, _SESSION_AND_PROBES.rows(conn, params))


def _session_and_claims(
    ctx: Context, rows: Sequence[Sequence[Any]]
) -> tuple[SessionState | None, list[domain.ClaimRow]]:
    """The session and the candidates from rows that lead with ``SESSION_COLUMNS`` (one row,
    the candidate's columns NULL, when there is none)."""
    width = len(SESSION_COLUMNS)
    return _session_in(ctx, rows[0]), _candidates(r[width:] for r in rows if r[width] is not None)


def _read_ahead(
    conn: Connection, ctx: Context, cmd: ClaimFiles
) -> tuple[SessionState | None, list[domain.ClaimRow]] | None:
    """The claim's session and candidates as the batch read them ahead, if they still hold."""
    wanted = declared_ahead(ctx, _CLAIMS_AHEAD)
    if wanted is None or cmd.session_id in rows_ahead.revived(conn):
        return None  # a sign of life since: its session's row is not what it read
    rows = rows_ahead.read(conn, wanted)
    return None if rows is None else _session_and_claims(ctx, rows)


def claim_files(conn: Connection, ctx: Context, cmd: ClaimFiles) -> Decision:
    paths = domain.normalise_paths(cmd.paths)  # 422 before anything is read or locked
    both = None
    if _lock_held(conn, ctx):  # the batch took the lock: read ahead for it, or both at once
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

    def join(
        d: Decision, me: SessionState, started: WaitStarted, refusal: DomainError, holders_live: Sequence[str]
    ) -> Decision:
        from eventcoord.handlers.waits import join_state, load_files_line

        line = [w for w in load_files_line(conn, ctx, started.paths, work)]
        state = join_state(conn, ctx, me.session_id, line, holders_live, work)
        return waits.join(d, state, me, started, refusal, ctx)

    return domain.decide_claim_files(
        domain.ClaimFilesState(session, held, holders, join if cmd.wait else None, work), cmd, ctx
    )


# Unreleased claims of one issue and holder, through the index of an issue's unreleased
# claims only (history of the issue never read). ``IS`` matches a null holder too. On
# PostgreSQL by the issue's live key, the only column named besides the holder, and sorted
# here rather than by the database: with ``workspace = $1 … ORDER BY position, idx`` a
# planner without statistics walked ``ix_file_claims_live_order``, every live claim of the
# workspace, to save sorting a few rows.
_OF_ISSUE_PG = f"{_CLAIM_SELECT} WHERE {PG_ISSUE_KEY} = :key AND session_id IS NOT DISTINCT FROM CAST(:sid AS text)"
_OF_ISSUE = Prepared(
    lambda d: (
        text(
            f"{_CLAIM_SELECT} INDEXED BY ix_file_claims_issue_live WHERE workspace = :ws AND issue = :issue"
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
        f" {_CLAIM_COLUMNS}{_SESSION_ALONE} LEFT JOIN LATERAL ({_OF_ISSUE_PG} OFFSET 0) AS c ON true"
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
        f" {_CLAIM_COLUMNS}"
        " FROM unnest(CAST(:ws AS text[]), CAST(:sid AS text[]), CAST(:key AS text[])) WITH ORDINALITY"
        " AS q(ws, sid, key, n)"
        # by its id alone (the primary key), as load_session reads it
        " LEFT JOIN LATERAL (SELECT * FROM sessions AS s WHERE s.session_id = q.sid AND (s.workspace || '') = q.ws"
        " OFFSET 0) AS s ON true"
        f" LEFT JOIN LATERAL ({_CLAIM_SELECT} WHERE {PG_ISSUE_KEY} = q.key"
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
    if _lock_held(conn, ctx):  # the batch took the lock: read ahead for it, or one round trip
        wanted = declared_ahead(ctx, _RELEASES_AHEAD)
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
    d = domain.decide_release_files(domain.ReleaseFilesState(session, [_claim_row(r) for r in claims]), cmd, ctx)
    released = list(d.result["released"])
    if released and anyone_waits is not False:
        files_hand_off(conn, ctx, d, released, lambda h: h.issue == cmd.issue and h.session_id == cmd.session_id)
    return d


def files_hand_off(
    conn: Connection, ctx: Context, d: Decision, released: Sequence[str], gone: Callable[[domain.ClaimRow], bool]
) -> None:
    """Serve the files waiters that ``released`` paths may unblock (the workspace is locked)."""
    from eventcoord.handlers.waits import load_files_line

    work = Work(DECISION_STEPS)  # choosing the line, then handing off: one decision's steps
    line = load_files_line(conn, ctx, released, work)
    if not line:
        return
    held = [
        h
        for h in overlap_candidates(conn, ctx, sorted({p for w in line for p in w.paths}))
        if not (gone(h) and h.path in released)
    ]
    holders = load_sessions(conn, ctx, {h.session_id for h in held if h.session_id is not None})
    hand_off_files(d, line, held, holders, Claimant(d.session_id, d.actor_key or "token"), ctx, work)
