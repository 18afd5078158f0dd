"""The file claims a decision reads: the live claims that could overlap some paths, read
through the partial index of unreleased claims; the workspace's lock that serialises
every claim_files (and every join of a line) of a workspace; the states claim_files and
release_files decide on.

On PostgreSQL the workspace row is locked FOR UPDATE before the claims are read, so two
claim_files of one workspace (on any replica) are decided one after the other and never
both grant overlapping exclusive claims. On SQLite the single writer already serialises.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, bindparam, exists, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import BindParameter

from eventcoord.commands import ReleaseFiles
from eventcoord.context import Context
from eventcoord.domain import files as domain
from eventcoord.domain.paths import literal_prefix
from eventcoord.domain.sessions import SessionState, claimant
from eventcoord.projections import keys
from eventcoord.projections.files import PG_ISSUE_KEY, issue_key, live_key
from eventcoord.projections.tables import waits
from eventcoord.reads.common import load_session, load_sessions
from eventcoord.store.key_spans import KeySpans
from eventcoord.store.loaders import loader
from eventcoord.store.prepared import Prepared
from eventcoord.store.schema import workspaces

_WS: BindParameter[str] = bindparam("ws")

_MAX_CHAR = 0x10FFFF
_MAX_ANCESTORS = 2000


def _insert_workspace(dialect: str) -> Executable:
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(workspaces)
    return insert.values(name=_WS, created_us=bindparam("at")).on_conflict_do_nothing()


_INSERT_WORKSPACE = Prepared(_insert_workspace)
_LOCK_WORKSPACE = Prepared(lambda d: select(workspaces.c.name).where(workspaces.c.name == _WS).with_for_update())


@loader
def lock_workspace(conn: Connection, ctx: Context) -> None:
    """Serialise every claim_files of the workspace until commit (PostgreSQL row lock).

    SQLite's one writer (``BEGIN IMMEDIATE``, in every process on the file) serialises every
    decision already: nothing is locked there, as for the guards (``lock_guard``).
    """
    if conn.dialect.name == "sqlite":
        return
    params = {"ws": ctx.workspace}
    if _LOCK_WORKSPACE.first(conn, params) is None:  # created on first use (the lock row of workspace-wide guards)
        _INSERT_WORKSPACE.run(conn, {"ws": ctx.workspace, "at": ctx.now_us})
        _LOCK_WORKSPACE.first(conn, params)


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
CLAIM_SELECT = "SELECT position, idx, issue, session_id, actor_key, path, exclusive FROM file_claims"
_LIVE = "workspace = :ws AND released_us IS NULL"
_SQLITE_LIVE = f"{CLAIM_SELECT} INDEXED BY ix_file_claims_live WHERE {_LIVE}"
_EQ = Prepared(lambda d: text(f"{_SQLITE_LIVE} AND literal_prefix = :p"))
_RANGE = Prepared(lambda d: text(f"{_SQLITE_LIVE} AND literal_prefix >= :lo AND literal_prefix < :hi"))
# Every live claim of the workspace (a '' prefix): on PostgreSQL any index the planner picks
# for ``workspace = … AND released_us IS NULL`` is a partial one of unreleased claims.
_ALL_LIVE = Prepared(lambda d: text(_SQLITE_LIVE if d == "sqlite" else f"{CLAIM_SELECT} WHERE {_LIVE}"))
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
PG_LIVE_KEY = keys.CLAIM_PREFIX_IN_ORDER
CLAIM_COLUMNS = "c.position, c.idx, c.issue, c.session_id, c.actor_key, c.path, c.exclusive"


def live_claims_between(lo: str, hi: str) -> str:
    """PostgreSQL: the live claims whose prefix key is in [``lo``, ``hi``) (SQL expressions):
    one probe of ``ix_file_claims_live_key``, kept a probe (``OFFSET 0``). Every read of the
    claims that could overlap some paths is built of these."""
    return f"{CLAIM_SELECT} WHERE {PG_LIVE_KEY} >= {lo} AND {PG_LIVE_KEY} < {hi} OFFSET 0"


PROBED = (
    "unnest(CAST(:lo AS text[]), CAST(:hi AS text[])) AS r(lo, hi) CROSS JOIN LATERAL ("
    f" {live_claims_between('r.lo', 'r.hi')}) AS c"
)
#: The probes name their rows by the ranges they read (``spans``): a claim's insert the
#: batch deferred, at keys outside them, goes with them (``store/key_spans.py``).
_PG_PROBES = Prepared(
    lambda d: text(f"SELECT {CLAIM_COLUMNS} FROM {PROBED}"),
    rows={"file_claims": ("spans",)},
    reads=("file_claims",),
)


def probe_ranges(prefixes: set[str]) -> tuple[list[str], list[tuple[str, str]]] | None:
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


def overlap_probes(workspace: str, paths: Iterable[str]) -> dict[str, Any] | None:
    """PostgreSQL: the parameters of the probes of the live claims that could overlap
    ``paths`` (``pg_probes``); None: they read every live claim of the workspace."""
    probes = probe_ranges({literal_prefix(p) for p in paths})
    return None if probes is None else pg_probes(workspace, probes)


def claim_row(r: Any) -> domain.ClaimRow:
    return domain.ClaimRow(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]))


def overlap_candidates(conn: Connection, ctx: Context, paths: Iterable[str]) -> list[domain.ClaimRow]:
    """Unreleased claims of the workspace that could overlap one of ``paths``.

    Two patterns can only overlap when one literal prefix extends the other, so the
    candidates are the claims whose prefix starts with a requested prefix, plus those whose
    prefix is one of its directory ancestors; both are probes of the partial index of
    unreleased claims, so history never slows a decision down, nor do live claims in paths
    that cannot overlap.
    """
    ws = ctx.workspace
    if conn.dialect.name == "postgresql":
        probed = overlap_probes(ws, paths)
        return candidates(_ALL_LIVE.rows(conn, {"ws": ws}) if probed is None else _PG_PROBES.rows(conn, probed))
    probes = probe_ranges({literal_prefix(p) for p in paths})
    rows: list[Any] = []
    if probes is None:
        rows = list(_ALL_LIVE.rows(conn, {"ws": ws}))
    else:
        above, ranges = probes
        for p in above:
            rows.extend(_EQ.rows(conn, {"ws": ws, "p": p}))
        for lo_, hi_ in ranges:
            rows.extend(_RANGE.rows(conn, {"ws": ws, "lo": lo_, "hi": hi_}))
    return candidates(rows)


def pg_probes(ws: str, probes: tuple[list[str], list[tuple[str, str]]]) -> dict[str, Any]:
    """The parameters of the PostgreSQL probes: ``lo``, ``hi`` and the ``spans`` they read."""
    above, ranges = probes
    lo = [live_key(ws, p) for p in above] + [live_key(ws, r[0]) for r in ranges]
    hi = [live_key(ws, p + "\x01") for p in above] + [live_key(ws, r[1]) for r in ranges]
    return {"lo": lo, "hi": hi, "spans": KeySpans(zip(lo, hi, strict=True))}


def candidates(rows: Iterable[Sequence[Any]]) -> list[domain.ClaimRow]:
    """Claims read by overlapping probes, each once, in claim order."""
    unique = {(r[0], r[1]): r for r in rows}
    return [claim_row(unique[k]) for k in sorted(unique)]


# Unreleased claims of one issue and holder, through the index of an issue's unreleased
# claims only (history of the issue never read). ``IS`` matches a null holder too. On
# PostgreSQL by the issue's live key, the only column named besides the holder, and sorted
# here rather than by the database: with ``workspace = $1 … ORDER BY position, idx`` a
# planner without statistics walked ``ix_file_claims_live_order``, every live claim of the
# workspace, to save sorting a few rows.
OF_ISSUE_PG = f"{CLAIM_SELECT} WHERE {PG_ISSUE_KEY} = :key AND session_id IS NOT DISTINCT FROM CAST(:sid AS text)"
_OF_ISSUE = Prepared(
    lambda d: (
        text(
            f"{CLAIM_SELECT} INDEXED BY ix_file_claims_issue_live WHERE workspace = :ws AND issue = :issue"
            " AND session_id IS :sid AND released_us IS NULL"
        )
        if d == "sqlite"
        else text(OF_ISSUE_PG)
    ),
    rows={"file_claims": ("key",)},
    reads=("file_claims",),
)


_ANYONE_WAITS = Prepared(
    lambda d: select(exists().where((waits.c.workspace == _WS) & (waits.c.kind == "files"))),
    reads=("waits",),
)


@dataclass(frozen=True, slots=True)
class ClaimRead:
    """What claim_files loads: the caller's session, the live claims that could overlap the
    paths asked for (a superset of those that do), and their holders."""

    session: SessionState | None
    held: list[domain.ClaimRow]
    holders: dict[str, SessionState]


@loader
def claim_state(conn: Connection, ctx: Context, session_id: str | None, paths: Sequence[str]) -> ClaimRead:
    """What claim_files decides on: the caller's session (SESSION_NOT_LIVE before the lock is
    taken), then, the workspace locked, the live claims that could overlap ``paths`` and
    their holders."""
    session = load_session(conn, ctx, session_id) if session_id else None
    claimant(session_id, session, ctx)
    lock_workspace(conn, ctx)
    return claim_read(conn, ctx, session, overlap_candidates(conn, ctx, paths))


def claim_read(conn: Connection, ctx: Context, session: SessionState | None, held: list[domain.ClaimRow]) -> ClaimRead:
    """A claim's state from its session and candidates: their holders read."""
    return ClaimRead(session, held, load_sessions(conn, ctx, {h.session_id for h in held if h.session_id is not None}))


@dataclass(frozen=True, slots=True)
class ReleaseRead:
    """What release_files loads: the decision's state, and whether anyone waits for files
    in the workspace (if no one does, a release hands nothing off: no line is read)."""

    state: domain.ReleaseFilesState
    anyone_waits: bool


def issue_params(ctx: Context, cmd: ReleaseFiles) -> dict[str, Any]:
    """The parameters of the reads of a release's claims."""
    return {"ws": ctx.workspace, "issue": cmd.issue, "key": issue_key(ctx.workspace, cmd.issue), "sid": cmd.session_id}


def release_read(ctx: Context, session: SessionState | None, rows: Iterable[Sequence[Any]]) -> domain.ReleaseFilesState:
    """A release's state from its session and its claims' rows, in claim order."""
    claims = sorted(rows, key=lambda r: (r[0], r[1]))  # position, idx
    return domain.ReleaseFilesState(session, [claim_row(r) for r in claims])


@loader
def release_state(conn: Connection, ctx: Context, cmd: ReleaseFiles) -> ReleaseRead:
    """What release_files decides on: the caller's session, then, the workspace locked (a
    waiter joins under this lock: none can slip past the hand-off), its claims of the issue."""
    session = load_session(conn, ctx, cmd.session_id) if cmd.session_id else None
    lock_workspace(conn, ctx)
    state = release_read(ctx, session, _OF_ISSUE.rows(conn, issue_params(ctx, cmd)))
    return ReleaseRead(state, bool(_ANYONE_WAITS.scalar(conn, {"ws": ctx.workspace})))
