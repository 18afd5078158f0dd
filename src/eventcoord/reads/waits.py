"""The waiting lines a decision reads (docs/protocol.md#waiting): a line in FIFO order, a
session's wait, the wait-for graph.

Joining a line locks the workspace row first (the lock claim_files takes), so every wait
that adds an edge to the wait-for graph is decided one after the other across replicas:
two joins can never together close a cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
from sqlalchemy import Connection, bindparam, select

from eventcoord.context import Context
from eventcoord.domain import waits as domain
from eventcoord.domain.deadlock import WaitGraph
from eventcoord.domain.files import ClaimRow, holder_is_live
from eventcoord.domain.paths import DECISION_STEPS, Work, overlaps_within
from eventcoord.liveness import live_clause
from eventcoord.projections.tables import leases, named_lease_slots, named_leases, sessions, waits
from eventcoord.reads.common import WS, load_sessions
from eventcoord.reads.files import lock_workspace, overlap_candidates
from eventcoord.store.prepared import Prepared

_COLUMNS = (
    waits.c.position,
    waits.c.kind,
    waits.c.key,
    waits.c.session_id,
    waits.c.actor_key,
    waits.c.since_us,
    waits.c.project,
    waits.c.issue,
    waits.c.paths,
    waits.c.exclusive,
    waits.c.ttl_seconds,
    waits.c.capacity,
)


#: Indexes into a row of ``_COLUMNS``.
_POS, _KIND, _KEY, _SID, _ACTOR, _SINCE, _PROJECT, _ISSUE, _PATHS, _EXCL, _TTL, _CAP = range(12)
_ONE_LINE = Prepared(
    lambda d: (
        select(*_COLUMNS)
        .where((waits.c.workspace == WS) & (waits.c.kind == bindparam("kind")) & (waits.c.key == bindparam("key")))
        .order_by(waits.c.position)
    )
)
_FILES_LINES = Prepared(
    lambda d: (
        select(*_COLUMNS)
        .where((waits.c.workspace == WS) & (waits.c.kind == "files"))
        .order_by(waits.c.position, waits.c.idx)
    )
)
_WAIT_OF = Prepared(
    lambda d: (
        select(*_COLUMNS)
        .where((waits.c.session_id == bindparam("sid")) & (waits.c.workspace == WS))
        .order_by(waits.c.position)
    )
)


def _waiters(conn: Connection, ctx: Context, rows: Iterable[Sequence[Any]]) -> list[domain.Waiter]:
    """Rows → waiters, one per wait (a files wait has a row per path), in position order."""
    by_position: dict[int, Sequence[Any]] = {}
    for r in rows:
        by_position.setdefault(r[_POS], r)
    if not by_position:  # the common case on the hot path: nobody waits
        return []
    found = sorted(by_position.values(), key=lambda r: int(r[_POS]))
    people = load_sessions(conn, ctx, {r[_SID] for r in found})
    return [
        domain.Waiter(
            position=r[_POS],
            kind=r[_KIND],
            key=r[_KEY] if r[_KIND] != "files" else (msgspec.json.decode(r[_PATHS]) or [r[_KEY]])[0],
            session_id=r[_SID],
            actor_key=r[_ACTOR],
            since_us=r[_SINCE],
            session=people.get(r[_SID]),
            project=r[_PROJECT],
            issue=r[_ISSUE],
            paths=tuple(msgspec.json.decode(r[_PATHS])),
            exclusive=bool(r[_EXCL]),
            ttl_seconds=r[_TTL],
            capacity=r[_CAP],
        )
        for r in found
    ]


def load_line(conn: Connection, ctx: Context, kind: str, key: str) -> list[domain.Waiter]:
    """The line of an issue or a named lease, in FIFO order."""
    return _waiters(conn, ctx, _ONE_LINE.rows(conn, {"ws": ctx.workspace, "kind": kind, "key": key}))


def load_files_line(
    conn: Connection, ctx: Context, paths: Sequence[str], work: Work | None = None
) -> list[domain.Waiter]:
    """The files waits any of whose paths overlaps one of ``paths``, in FIFO order.

    The checks spend ``work`` (the command's; else a decision's steps of their own): a wait
    whose overlap is still undecided when they run out is counted in, the careful answer
    (a hand-off checks again before it grants anything).
    """
    work = work if work is not None else Work(DECISION_STEPS)
    line = _waiters(conn, ctx, _FILES_LINES.rows(conn, {"ws": ctx.workspace}))
    return [w for w in line if any(overlaps_within(p, q, work) is not False for p in w.paths for q in paths)]


def load_wait_of(conn: Connection, ctx: Context, session_id: str) -> domain.Waiter | None:
    """The one wait a session is in, if any."""
    found = _waiters(conn, ctx, _WAIT_OF.rows(conn, {"ws": ctx.workspace, "sid": session_id}))
    return found[0] if found else None


def load_graph(conn: Connection, ctx: Context, work: Work | None = None) -> WaitGraph:
    """The workspace's wait-for graph: every live waiter → the live holders of what it waits for.

    Whether a files waiter waits for a claim spends ``work`` (the command's; else steps of
    its own); a pair still undecided when they run out counts as waiting, the careful
    answer (a wait may then be refused as a deadlock that a longer search would allow).
    """
    work = work if work is not None else Work(DECISION_STEPS)
    graph = WaitGraph()
    rows = conn.execute(
        select(*_COLUMNS).where(waits.c.workspace == ctx.workspace).order_by(waits.c.position, waits.c.idx)
    )
    all_waits = [w for w in _waiters(conn, ctx, [tuple(r) for r in rows]) if domain.waiter_live(w, ctx)]
    issue_keys = sorted({w.key for w in all_waits if w.kind == "issue"})
    lease_keys = sorted({w.key for w in all_waits if w.kind == "lease"})
    issue_holders: dict[str, list[str]] = {}
    if issue_keys:
        for issue, sid in conn.execute(
            select(leases.c.issue, leases.c.session_id)
            .select_from(leases.join(sessions, sessions.c.session_id == leases.c.session_id))
            .where(
                (leases.c.workspace == ctx.workspace)
                & leases.c.issue.in_(issue_keys)
                & leases.c.released_us.is_(None)
                & live_clause(sessions.c.last_seen_us, sessions.c.ended_us, ctx.cutoff_us)
            )
        ):
            issue_holders.setdefault(issue, []).append(sid)
    lease_holders: dict[str, list[str]] = {}
    capacity: dict[str, int] = {}
    if lease_keys:
        capacity = dict(
            conn.execute(
                select(named_leases.c.name, named_leases.c.capacity).where(
                    (named_leases.c.workspace == ctx.workspace) & named_leases.c.name.in_(lease_keys)
                )
            ).all()
        )
        for name, sid in conn.execute(
            select(named_lease_slots.c.name, named_lease_slots.c.session_id).where(
                (named_lease_slots.c.workspace == ctx.workspace)
                & named_lease_slots.c.name.in_(lease_keys)
                & (named_lease_slots.c.expires_us > ctx.now_us)
            )
        ):
            lease_holders.setdefault(name, []).append(sid)
    file_waits = [w for w in all_waits if w.kind == "files"]
    claims: list[ClaimRow] = (
        overlap_candidates(conn, ctx, sorted({p for w in file_waits for p in w.paths})) if file_waits else []
    )
    holders = load_sessions(conn, ctx, {c.session_id for c in claims if c.session_id is not None})
    for w in all_waits:
        if w.kind == "issue":
            for h in issue_holders.get(w.key, ()):
                graph.add(w.session_id, "issue", w.key, h)
        elif w.kind == "lease":
            held = lease_holders.get(w.key, ())
            if len(held) < capacity.get(w.key, 1):  # a slot is free: its next look serves it
                graph.add_free(w.session_id)
            for h in held:
                graph.add(w.session_id, "lease", w.key, h)
        else:
            for c in claims:
                blocks = (
                    c.session_id is not None
                    and (w.exclusive or c.exclusive)
                    and not (c.issue == w.issue and c.session_id == w.session_id)
                )
                if (
                    blocks
                    and holder_is_live(c, holders, ctx)
                    and any(overlaps_within(p, c.path, work) is not False for p in w.paths)
                    and c.session_id is not None
                ):
                    graph.add(w.session_id, "files", c.path, c.session_id)
    return graph


def join_state(
    conn: Connection,
    ctx: Context,
    session_id: str,
    line: Sequence[domain.Waiter],
    holders: Sequence[str],
    work: Work | None = None,
) -> domain.JoinState:
    """Lock the workspace (serialising every join), then the caller's wait and the graph
    (its overlap checks spend ``work``, the command's)."""
    lock_workspace(conn, ctx)
    current = load_wait_of(conn, ctx, session_id)
    graph = load_graph(conn, ctx, work) if current is None else None
    return domain.JoinState(line, current, graph, tuple(holders))
