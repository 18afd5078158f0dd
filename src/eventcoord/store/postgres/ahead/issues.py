"""PostgreSQL's reads ahead of the issue tier: claims' and releases' guards and rows, for a batch.

Once a batch holds the guards of its claims (or of its releases' leases' projects), it
reads what each reads next in one statement for all of them (``RowsAhead``); the
substitutes of ``reads/issues.py``'s loaders build the same states from those rows, and
read for themselves (the plain bodies) where nothing was read ahead or it no longer holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

from eventcoord.commands import ClaimIssue, ReleaseIssue
from eventcoord.context import Context
from eventcoord.domain import issues as domain
from eventcoord.domain import streams
from eventcoord.domain.admission import ProjectRules
from eventcoord.projections.sessions import PG_DECLARING_KEY, declaring_key
from eventcoord.reads import issues as reads
from eventcoord.reads.common import SESSION_COLUMNS, lock_guard
from eventcoord.store.loaders import substitute
from eventcoord.store.postgres import held_locks, rows_ahead
from eventcoord.store.postgres.held_locks import GuardLock
from eventcoord.store.postgres.rows_ahead import RowsAhead
from eventcoord.store.prepared import Prepared, pending_signs_of_life

#: The guards of the projects of many issues' unreleased leases (``ws`` and
#: ``key``, the issues, in pairs) locked at once for a batch's releases, in key order,
#: skipping any another transaction holds (a lease's guard exists: its claim made it).
#: Rows: workspace, guard key, issue (``held_locks.lease_guard``). The key is
#: ``streams.project``'s, built in SQL from its prefix.
_LEASE_GUARDS_AHEAD = Prepared(
    lambda d: text(
        "SELECT g.workspace, g.key, w.issue"
        " FROM unnest(CAST(:ws AS text[]), CAST(:key AS text[])) AS w(workspace, issue)"
        # each a lateral probe by its key (never a join that reads every lease or guard)
        " CROSS JOIN LATERAL (SELECT project FROM leases WHERE leases.workspace = w.workspace"
        " AND leases.issue = w.issue AND leases.released_us IS NULL OFFSET 0) AS l"
        " CROSS JOIN LATERAL (SELECT workspace, key FROM guards WHERE guards.workspace = w.workspace"
        f" AND guards.key = '{streams.project('')}' || l.project OFFSET 0 FOR UPDATE SKIP LOCKED) AS g"
    ),
    writes="guards",
)


#: The caller's sessions row in a read ahead (``c``): its columns, as ``SESSION_COLUMNS``.
_SESSION_NAMES = ", ".join(f"c.{c.name}" for c in SESSION_COLUMNS)
#: The reads ahead of claims and releases, for each entry ``a`` (its ``ws`` and ``issue``):
#: whether anyone waits in the issue's line (``w``) and its unreleased lease, locked (``l``).
#: Each a lateral probe by its key (``OFFSET 0`` where a subquery could be flattened into a
#: join that a generic plan would answer by reading a whole table).
_AHEAD_LINE_AND_LEASE = (
    " LEFT JOIN LATERAL (SELECT true AS waiting FROM waits WHERE waits.workspace = a.ws AND waits.kind = 'issue'"
    " AND waits.key = a.issue LIMIT 1) AS w ON true"
    " LEFT JOIN LATERAL (SELECT issue, project, session_id, actor_key, fencing_token FROM leases"
    " WHERE leases.workspace = a.ws AND leases.issue = a.issue AND leases.released_us IS NULL FOR UPDATE) AS l"
    " ON true"
)
#: ... and the caller's session (``c``), by its id alone (the primary key), as
#: ``reads.issues``' release reads read it; the rows in entry order.
_AHEAD_CALLER = (
    " LEFT JOIN LATERAL (SELECT * FROM sessions AS c WHERE c.session_id = a.sid AND (c.workspace || '') = a.ws"
    " OFFSET 0) AS c ON true"
    " ORDER BY a.n"
)
#: What ``reads.issues.release_after_lock`` reads, for many releases at once (every
#: parameter a list, one entry per release; rows by ``n``, the entry's ordinal), once the
#: batch holds the guards of their leases' projects (``store/postgres/rows_ahead.py``): whether
#: anyone waits in the issue's line, the lease, locked, and the caller's session.
_RELEASES_AHEAD = Prepared(
    lambda d: text(
        "SELECT a.n, w.waiting IS NOT NULL, l.issue, l.project, l.session_id, l.actor_key, l.fencing_token,"
        f" {_SESSION_NAMES}"
        " FROM unnest(CAST(:ws AS text[]), CAST(:issue AS text[]), CAST(:sid AS text[]))"
        " WITH ORDINALITY AS a(ws, issue, sid, n)" + _AHEAD_LINE_AND_LEASE + _AHEAD_CALLER
    )
)


def release_rows_ahead(workspace: str, cmd: ReleaseIssue) -> RowsAhead:
    """What a release reads once the guard of its lease's project is held, which a
    PostgreSQL batch may read ahead for all its releases (``store/postgres/rows_ahead.py``)."""
    return RowsAhead(
        _RELEASES_AHEAD,
        (("ws", workspace), ("issue", cmd.issue), ("sid", cmd.session_id)),
        (("leases", (workspace, cmd.issue)), ("waits", (workspace, cmd.issue)), ("sessions", (cmd.session_id,))),
        held_locks.lease_guard(workspace, cmd.issue),
    )


def release_lock_ahead(workspace: str, issue: str) -> GuardLock:
    """What a release locks first, its lease's project's guard, which a PostgreSQL batch
    can lock ahead for all its releases."""
    return GuardLock(_LEASE_GUARDS_AHEAD, workspace, issue)


#: Declarers a claim read ahead reads at most (one more: it reads for itself).
_AHEAD_DECLARERS = 8
#: What ``reads.issues.claim_after_lock`` reads, for many claims at once (every
#: parameter a list, one entry per claim; rows by ``n``, the entry's ordinal), once the
#: batch holds their projects' guards (``store/postgres/rows_ahead.py``). Instead of whether a live
#: session declared working on the issue, every session that declares it (up to one more
#: than ``_AHEAD_DECLARERS``, in id order) and when each was last seen: a sign of life the
#: batch writes later makes one live.
_CLAIMS_AHEAD = Prepared(
    lambda d: text(
        "SELECT a.n, p.wip_limit, p.lock_delay_seconds, p.agent_wip_limit, pl.unreleased,"
        " i.issue, i.project, i.last_fencing_token, i.handoff_note, i.handoff_session_id, i.delay_from_us,"
        " i.delay_session_id,"
        " w.waiting IS NOT NULL,"
        f" ARRAY(SELECT sessions.session_id FROM sessions WHERE {PG_DECLARING_KEY} = a.declaring"
        f" ORDER BY sessions.session_id LIMIT {_AHEAD_DECLARERS + 1}),"
        f" ARRAY(SELECT sessions.last_seen_us FROM sessions WHERE {PG_DECLARING_KEY} = a.declaring"
        f" ORDER BY sessions.session_id LIMIT {_AHEAD_DECLARERS + 1}),"
        f" l.issue, l.project, l.session_id, l.actor_key, l.fencing_token, {_SESSION_NAMES}"
        " FROM unnest(CAST(:ws AS text[]), CAST(:project AS text[]), CAST(:issue AS text[]), CAST(:sid AS text[]),"
        " CAST(:declaring AS text[])) WITH ORDINALITY AS a(ws, project, issue, sid, declaring, n)"
        # Each row a lateral probe by its key (``OFFSET 0``: never flattened into a join that
        # a generic plan could answer by reading a whole table).
        " LEFT JOIN LATERAL (SELECT * FROM projects WHERE projects.workspace = a.ws"
        " AND projects.project = a.project OFFSET 0) AS p ON true"
        " LEFT JOIN LATERAL (SELECT * FROM project_leases WHERE project_leases.workspace = a.ws"
        " AND project_leases.project = a.project OFFSET 0) AS pl ON true"
        " LEFT JOIN LATERAL (SELECT * FROM issues WHERE issues.workspace = a.ws AND issues.issue = a.issue OFFSET 0)"
        " AS i ON true" + _AHEAD_LINE_AND_LEASE + _AHEAD_CALLER
    )
)


def claim_rows_ahead(workspace: str, cmd: ClaimIssue) -> RowsAhead:
    """What a claim reads once its project's guard is held, which a PostgreSQL batch may
    read ahead for all its claims (``store/postgres/rows_ahead.py``)."""
    ws, project, issue = workspace, cmd.project, cmd.issue
    return RowsAhead(
        _CLAIMS_AHEAD,
        (
            ("ws", ws),
            ("project", project),
            ("issue", issue),
            ("sid", cmd.session_id),
            ("declaring", declaring_key(ws, issue)),
        ),
        (
            ("projects", (ws, project)),
            ("project_leases", (ws, project)),
            ("issues", (ws, issue)),
            ("leases", (ws, issue)),
            ("waits", (ws, issue)),
            ("sessions", (cmd.session_id,)),
        ),
        held_locks.guard(ws, streams.project(project)),
        (("project_leases", "unreleased", reads.CLAIM_UNRELEASED_AT),),  # moved by the batch's grants
    )


def _claim_row_ahead(conn: Connection, ctx: Context, cmd: ClaimIssue) -> Sequence[Any] | None:
    """The claim's row read ahead, as ``reads.issues.claim_after_lock`` reads it (None: none
    holds, or too many declare the issue to tell from it)."""
    ahead = rows_ahead.read(conn, claim_rows_ahead(ctx.workspace, cmd))
    if ahead is None:
        return None
    at = reads.CLAIM_DECLARED_AT  # the declarers and when each was seen, where the flag is
    declarers, seen = ahead[at], ahead[at + 1]
    if len(declarers) > _AHEAD_DECLARERS:
        return None
    revived = rows_ahead.revived(conn)
    declared = any(t > ctx.cutoff_us or sid in revived for sid, t in zip(declarers, seen, strict=True))
    return (*ahead[:at], declared, *ahead[at + 2 :])


@substitute(reads.load_claim)
def load_claim(conn: Connection, ctx: Context, cmd: ClaimIssue) -> domain.ClaimState:
    """Once the batch holds the project's guard (locked ahead, or by an earlier claim): the
    row read ahead with the batch's claims, else the caller's session with the rest, in one
    statement, the sessions whose sign of life is pending counted live."""
    if not held_locks.held(conn, held_locks.guard(ctx.workspace, streams.project(cmd.project))):
        return reads.load_claim.plain(conn, ctx, cmd)
    row = _claim_row_ahead(conn, ctx, cmd)
    if row is None:
        return reads.claim_after_lock(conn, ctx, cmd, pending_signs_of_life(conn))
    return reads.claim_with_session(conn, ctx, cmd, row)


@substitute(reads.load_release)
def load_release(conn: Connection, ctx: Context, cmd: ReleaseIssue) -> domain.ReleaseState:
    """Once the batch locked the guard of the issue's lease's project ahead: one statement
    reads what the peek and the locked reads read (or the batch read it ahead)."""
    if not held_locks.held(conn, held_locks.lease_guard(ctx.workspace, cmd.issue)):
        return reads.load_release.plain(conn, ctx, cmd)
    row = None
    if cmd.session_id not in rows_ahead.revived(conn):
        row = rows_ahead.read(conn, release_rows_ahead(ctx.workspace, cmd))  # read with the batch's releases
    caller, waiting, lease = (
        reads.release_after_lock(conn, ctx, cmd) if row is None else reads.release_with_session(ctx, row)
    )
    if lease is not None and lease.session_id == cmd.session_id:
        key = streams.project(lease.project)
        if not held_locks.held(conn, held_locks.guard(ctx.workspace, key)):
            # Not the lease whose guard was locked ahead (one granted since, in the batch):
            # its guard first, then read again what it guards.
            lock_guard(conn, ctx.workspace, key)
            waiting, lease = reads.release_reads(conn, ctx, cmd)
    return reads.release_state(conn, ctx, cmd, caller, waiting, lease)


@substitute(reads.lock_project_rules)
def lock_project_rules(conn: Connection, ctx: Context, project: str) -> ProjectRules:
    """Only the rules read when the batch holds the project's guard already; else both, the
    guard remembered."""
    lock = held_locks.guard(ctx.workspace, streams.project(project))
    if held_locks.held(conn, lock):
        return reads.project_rules_after_lock(conn, ctx, project)
    rules = reads.lock_project_rules.plain(conn, ctx, project)
    held_locks.hold(conn, lock)
    return rules
