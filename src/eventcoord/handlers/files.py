"""Handlers of file claims: lock the workspace, load the live claims that could overlap, decide.

On PostgreSQL the workspace row is locked FOR UPDATE before the claims are read, so two
claim_files of one workspace (on any replica) are decided one after the other and never
both grant overlapping exclusive claims. On SQLite the single writer already serialises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, or_, select

from eventcoord.auth import ensure_workspace
from eventcoord.commands import ClaimFiles, ReleaseFiles
from eventcoord.context import Context, Decision
from eventcoord.domain import files as domain
from eventcoord.domain import waits
from eventcoord.domain.handoff import hand_off_files
from eventcoord.domain.paths import literal_prefix
from eventcoord.domain.sessions import Claimant, SessionState, claimant
from eventcoord.errors import DomainError
from eventcoord.events import WaitStarted
from eventcoord.handlers.common import load_session, load_sessions
from eventcoord.projections.tables import file_claims
from eventcoord.store.schema import workspaces

_CLAIM_COLUMNS = (
    file_claims.c.position,
    file_claims.c.idx,
    file_claims.c.issue,
    file_claims.c.session_id,
    file_claims.c.actor_key,
    file_claims.c.path,
    file_claims.c.exclusive,
)
_MAX_CHAR = 0x10FFFF
_MAX_ANCESTORS = 2000


def lock_workspace(conn: Connection, ctx: Context) -> None:
    """Serialise every claim_files of the workspace until commit (PostgreSQL row lock)."""
    ensure_workspace(conn, ctx.workspace, ctx.now_us)
    conn.execute(select(workspaces.c.name).where(workspaces.c.name == ctx.workspace).with_for_update())


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


def overlap_candidates(conn: Connection, ctx: Context, paths: Iterable[str]) -> list[domain.ClaimRow]:
    """Unreleased claims of the workspace that could overlap one of ``paths``.

    Two patterns can only overlap when one literal prefix extends the other, so the
    candidates are the claims whose prefix starts with a requested prefix, plus those whose
    prefix is one of its directory ancestors; both are lookups in the partial index of
    unreleased claims, so history never slows a decision down.
    """
    prefixes = {literal_prefix(p) for p in paths}
    where = (file_claims.c.workspace == ctx.workspace) & file_claims.c.released_us.is_(None)
    above = sorted(set().union(*(ancestors(p) for p in prefixes)))
    # A requested '' prefix ('*', '**/x') can overlap anything; absurdly deep paths would
    # need more bind parameters than SQLite allows: both read every unreleased claim.
    if "" not in prefixes and len(above) <= _MAX_ANCESTORS:
        below = [starts_with(conn, file_claims.c.literal_prefix, p) for p in sorted(prefixes)]
        where = where & or_(file_claims.c.literal_prefix.in_(above), *below)
    rows = conn.execute(select(*_CLAIM_COLUMNS).where(where).order_by(file_claims.c.position, file_claims.c.idx))
    return [domain.ClaimRow(*r) for r in rows]


def claim_files(conn: Connection, ctx: Context, cmd: ClaimFiles) -> Decision:
    paths = domain.normalise_paths(cmd.paths)  # 422 before anything is read or locked
    session = load_session(conn, ctx, cmd.session_id) if cmd.session_id else None
    claimant(cmd.session_id, session, ctx)  # SESSION_NOT_LIVE before taking the lock
    lock_workspace(conn, ctx)
    held = overlap_candidates(conn, ctx, paths)
    holders = load_sessions(conn, ctx, {h.session_id for h in held if h.session_id is not None})

    def join(d: Decision, me: SessionState, started: WaitStarted, refusal: DomainError, holders_live: Sequence[str]) -> Decision:
        from eventcoord.handlers.waits import join_state, load_files_line

        line = [w for w in load_files_line(conn, ctx, started.paths)]
        return waits.join(d, join_state(conn, ctx, me.session_id, line, holders_live), me, started, refusal, ctx)

    return domain.decide_claim_files(domain.ClaimFilesState(session, held, holders, join if cmd.wait else None), cmd, ctx)


def release_files(conn: Connection, ctx: Context, cmd: ReleaseFiles) -> Decision:
    session = load_session(conn, ctx, cmd.session_id) if cmd.session_id else None
    lock_workspace(conn, ctx)  # a waiter joins under this lock: none can slip past the hand-off
    holder = file_claims.c.session_id.is_(None) if cmd.session_id is None else file_claims.c.session_id == cmd.session_id
    rows = conn.execute(
        select(*_CLAIM_COLUMNS)
        .where((file_claims.c.workspace == ctx.workspace) & (file_claims.c.issue == cmd.issue) & holder & file_claims.c.released_us.is_(None))
        .order_by(file_claims.c.position, file_claims.c.idx)
    )
    d = domain.decide_release_files(domain.ReleaseFilesState(session, [domain.ClaimRow(*r) for r in rows]), cmd, ctx)
    released = list(d.result["released"])
    if released:
        files_hand_off(conn, ctx, d, released, lambda h: h.issue == cmd.issue and h.session_id == cmd.session_id)
    return d


def files_hand_off(conn: Connection, ctx: Context, d: Decision, released: Sequence[str], gone: Callable[[domain.ClaimRow], bool]) -> None:
    """Serve the files waiters that ``released`` paths may unblock (the workspace is locked)."""
    from eventcoord.handlers.waits import load_files_line

    line = load_files_line(conn, ctx, released)
    if not line:
        return
    held = [h for h in overlap_candidates(conn, ctx, sorted({p for w in line for p in w.paths})) if not (gone(h) and h.path in released)]
    holders = load_sessions(conn, ctx, {h.session_id for h in held if h.session_id is not None})
    hand_off_files(d, line, held, holders, Claimant(d.session_id, d.actor_key or "token"), ctx)
