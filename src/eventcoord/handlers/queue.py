"""Handlers of the work queue: load (and lock) what enqueue, claim_next_work, start/finish read.

Every queue command on a project first locks the project's guard row (the same lock the
WIP cap uses), so its decisions are serialised by the database across replicas, then
re-queues the items of the project's stale non-human workers. Candidates are read with
``FOR UPDATE SKIP LOCKED`` and transitions lock their item row: two pulls never return the
same item. Lock order: project guard → sessions → work items → issue leases.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import reduce
from typing import Any

import msgspec
from sqlalchemy import Connection, bindparam, func, literal_column, select, text, true
from sqlalchemy.sql import Executable, Select

from eventcoord.commands import ClaimNextWork, EnqueueWork, FinishWork, StartWork
from eventcoord.context import Context, Decision
from eventcoord.domain import queue as domain
from eventcoord.domain.handoff import IssueLine
from eventcoord.domain.issues import IssueView, LeaseState
from eventcoord.domain.paths import literal_prefix
from eventcoord.domain.sessions import SessionState
from eventcoord.handlers.common import SESSION_COLUMNS, WS, load_session, load_sessions, own_session
from eventcoord.handlers.files import overlap_candidates
from eventcoord.handlers.issues import (
    issue_line,
    live_lease_count,
    load_issue_view,
    load_lease,
    lock_project,
)
from eventcoord.liveness import not_live_clause
from eventcoord.projections.queue import (
    ONE_ITEM,
    PG_LIVE_KEY,
    PG_QUEUED_ISSUE_KEY,
    held_key,
    live_key,
    queued_issue_key,
    statuses,
)
from eventcoord.projections.tables import issues, leases, sessions, work_items
from eventcoord.store.prepared import Prepared, indexed_by, unindexed
from eventcoord.store.schema import workspaces

PAGE = 100
FIRST_PAGES = (4, 32)

_ITEM_COLUMNS = (
    work_items.c.item_id,
    work_items.c.project,
    work_items.c.issue,
    work_items.c.priority,
    work_items.c.status,
    work_items.c.session_id,
    work_items.c.fencing_token,
    work_items.c.blocked_by,
    work_items.c.paths,
    work_items.c.payload,
    work_items.c.enqueued_position,
)


def _item(row: Sequence[Any]) -> domain.ItemState:
    """An item from a row of ``_ITEM_COLUMNS`` (a tuple: prebuilt statements give no names)."""
    item_id, project, issue, priority, status, session_id, fencing_token, blocked_by, paths, payload, enqueued = row
    return domain.ItemState(
        item_id=item_id,
        project=project,
        issue=issue,
        priority=priority,
        status=status,
        session_id=session_id,
        fencing_token=fencing_token,
        blocked_by=tuple(msgspec.json.decode(blocked_by)),
        paths=tuple(msgspec.json.decode(paths)),
        payload=payload,
        enqueued_position=enqueued,
    )


# The hot statements of the queue tier, built once (``Prepared``), like the issue tier's.
# (An IN list of binds would compile to an expanding parameter, which fixed SQL cannot hold;
# the active statuses are literals, so an index on the status searches just them.)
_ACTIVE_LITERAL = work_items.c.status.in_([literal_column(f"'{s}'") for s in domain.ACTIVE])


# By the primary key only: the workspace is checked, not searched by (``|| ''``; see
# projections/queue.py's ``_ITEM``).
_ITEM_SELECT = select(*_ITEM_COLUMNS).where(
    (work_items.c.item_id == bindparam("item")) & (unindexed(work_items.c.workspace) == WS)
)
_ITEM_PLAIN = Prepared(lambda d: _ITEM_SELECT, rows=ONE_ITEM)  # (another item's writes may go with it)
_ITEM_FOR_UPDATE = Prepared(lambda d: _ITEM_SELECT.with_for_update(), rows=ONE_ITEM)
# The workers of the project's claimed and running items that are stale (one row per item,
# deduplicated by the caller: usually none), read from the items to their sessions only: no
# index of work_items by session may serve it (after ANALYZE both planners drove from the
# sessions, or walked ``ix_work_items_session`` for a DISTINCT: each session's every item).
# PostgreSQL reads the items by their live key (``PG_LIVE_KEY``), the only index that can
# serve them (with ``workspace = $1 AND project = $2`` a planner without statistics read
# ``ix_work_items_status_order`` by the workspace alone, every item the workspace ever had;
# 0012_queue_live_key), then probes each one's session in a lateral subquery (``OFFSET 0``
# keeps it from being flattened into a join that a generic plan made on small tables hashed
# every session for). SQLite reads ``ix_work_items_queue`` (the statuses literal, so both are
# searched) and joins the sessions by their key (``|| ''`` on the items' side).
_STALE_WORKER = (sessions.c.kind != "human") & not_live_clause(
    sessions.c.last_seen_us, sessions.c.ended_us, bindparam("cutoff")
)


def _pg_suspects() -> Select[Any]:
    return (
        select(work_items.c.session_id)
        .select_from(
            work_items.join(
                select(literal_column("1").label("one"))
                .where((sessions.c.session_id == work_items.c.session_id) & _STALE_WORKER)
                .offset(literal_column("0"))
                .lateral("stale"),
                true(),
            )
        )
        .where(literal_column(PG_LIVE_KEY) == bindparam("key"))
    )


_SUSPECTS = Prepared(
    lambda d: (
        select(work_items.c.session_id)
        .select_from(work_items.join(sessions, sessions.c.session_id == unindexed(work_items.c.session_id)))
        .where(
            (work_items.c.workspace == WS)
            & (work_items.c.project == bindparam("project"))
            & _ACTIVE_LITERAL
            & _STALE_WORKER
        )
        if d == "sqlite"
        else _pg_suspects()
    )
)
# PostgreSQL: a pull's session locked, with its project's suspects (``_SUSPECTS``, as an
# array) in the same statement: one round trip where there were two. Both are read after
# the project's guard, which the pull took in a statement before.
_SESSION_AND_SUSPECTS = Prepared(
    lambda d: (
        select(*SESSION_COLUMNS, select(func.array_agg(_pg_suspects().subquery().c.session_id)).scalar_subquery())
        .where((sessions.c.session_id == bindparam("sid")) & (unindexed(sessions.c.workspace) == WS))
        .with_for_update(of=sessions)
    )
)


# A project's ready items (queued, waiting on nothing: 0016_queue_ready) in pull order,
# highest priority first, then in enqueue order, a page at a time: those on no issue
# another session holds (0017_queue_held), that is, the ones no one holds and the puller's
# own (``held_by = :me``), two walks of one index merged (each ``LIMIT``ed, then the
# page's), never of the items that wait on others or that others hold, live or stale (a
# pull never takes their lease: ``grant_for_work``; it used to walk them, the database
# passing each after a probe of its issue's lease). PostgreSQL compares the live key
# (``…queued`` and ``…held\x01<me>``), which ``ix_work_items_live_key`` alone indexes;
# SQLite names ``ix_work_items_ready`` and ``ix_work_items_held`` (``INDEXED BY``: its
# statements are text). The issues a pull's own recovery releases are read on their own
# (``QueuedItems``): the read model marks them free only once its events are applied.
_SQLITE_READY = (
    "SELECT {columns} FROM work_items INDEXED BY ix_work_items_ready"
    " WHERE workspace = :ws AND project = :project AND status = 'queued' AND waiting_on = 0 AND held_by IS NULL"
)
_SQLITE_MINE = (
    "SELECT {columns} FROM work_items INDEXED BY ix_work_items_held"
    " WHERE workspace = :ws AND project = :project AND status = 'queued' AND waiting_on = 0 AND held_by = :me"
)
# A project's ready items without an issue, or on one issue, in pull order: what a pull at
# the project's cap may still take (0015_queue_at_cap), and the items on an issue the
# pull's recovery released. PostgreSQL compares the queued issue key, which only
# ``ix_work_items_queued_issue_key`` indexes; SQLite names ``ix_work_items_queued_issue``
# (``IS``: an item without an issue has a NULL one).
_SQLITE_ON_ISSUE = (
    "SELECT {columns} FROM work_items INDEXED BY ix_work_items_queued_issue"
    " WHERE workspace = :ws AND project = :project AND status = 'queued' AND waiting_on = 0 AND issue IS :issue"
)
_PG_READY = f"SELECT {{columns}} FROM work_items WHERE {PG_LIVE_KEY} = :key"
_PG_MINE = f"SELECT {{columns}} FROM work_items WHERE {PG_LIVE_KEY} = :mine"
_PG_ON_ISSUE = f"SELECT {{columns}} FROM work_items WHERE {PG_QUEUED_ISSUE_KEY} = :qkey"
#: After a page's last item, in pull order (``_pages`` binds ``priority``, ``priority2``, ``after``).
_AFTER = " AND (priority < :priority OR (priority = :priority2 AND enqueued_position > :after))"
_IN_ORDER = " ORDER BY priority DESC, enqueued_position LIMIT :page"


def _in_pull_order(d: str, on_issue: bool, after: bool) -> Executable:
    columns = ", ".join(c.name for c in _ITEM_COLUMNS)
    then = _AFTER if after else ""
    lock = "" if d == "sqlite" else " FOR UPDATE SKIP LOCKED"
    if on_issue:
        return text(
            (_SQLITE_ON_ISSUE if d == "sqlite" else _PG_ON_ISSUE).format(columns=columns) + then + _IN_ORDER + lock
        )
    # Each walk a subquery: SQLite orders, and PostgreSQL locks, a UNION's parts only so.
    ready, mine = (_SQLITE_READY, _SQLITE_MINE) if d == "sqlite" else (_PG_READY, _PG_MINE)
    parts = (
        f"SELECT {columns} FROM ({q.format(columns=columns)}{then}{_IN_ORDER}{lock}) AS {name}"
        for q, name in ((ready, "ready"), (mine, "mine"))
    )
    return text(" UNION ALL ".join(parts) + _IN_ORDER)


_FIRST_PAGE = Prepared(lambda d: _in_pull_order(d, on_issue=False, after=False))
_NEXT_PAGE = Prepared(lambda d: _in_pull_order(d, on_issue=False, after=True))
_ON_ISSUE_FIRST = Prepared(lambda d: _in_pull_order(d, on_issue=True, after=False))
_ON_ISSUE_NEXT = Prepared(lambda d: _in_pull_order(d, on_issue=True, after=True))


# The worker's other claimed or running items on the issue: one count per status, each
# through ix_work_items_session (session_id, status) by both columns, the only index that can
# serve it (no other leads with the session; an item's id is only compared with <>). With the
# statuses as one condition (``status = $2 OR status = $3``, or ``IN``) a generic plan may
# use the session alone and filter every item the session ever held.
def _other_active(status: str) -> Any:
    return (
        select(func.count())
        .where(
            (work_items.c.session_id == bindparam("sid"))
            & (work_items.c.status == literal_column(f"'{status}'"))
            & (work_items.c.issue == bindparam("issue"))
            & (work_items.c.item_id != bindparam("item"))
        )
        .scalar_subquery()
    )


_OTHER_ACTIVE = Prepared(lambda d: select(reduce(operator.add, (_other_active(s) for s in domain.ACTIVE))))
# The issues a session holds (through ix_leases_session_live: its unreleased leases only;
# SQLite names it, or it read every unreleased lease of the workspace through
# uq_leases_unreleased, which leads with the workspace).
_HELD_ISSUES_SELECT = select(leases.c.issue).where(
    (leases.c.session_id == bindparam("sid"))
    & leases.c.session_id.is_not(None)  # (for INDEXED BY: the index's own condition)
    & leases.c.released_us.is_(None)
    & (leases.c.workspace == WS)
)
_HELD_ISSUES = Prepared(lambda d: indexed_by(d, _HELD_ISSUES_SELECT, "leases", "ix_leases_session_live"))
_ISSUE_PROJECT = Prepared(
    lambda d: select(issues.c.project).where((issues.c.workspace == WS) & (issues.c.issue == bindparam("issue")))
)
_SHARE_WORKSPACE = Prepared(
    lambda d: select(workspaces.c.name).where(workspaces.c.name == WS).with_for_update(read=True)
)


def load_item(conn: Connection, ctx: Context, item_id: str, *, lock: bool = False) -> domain.ItemState | None:
    """One work item of the caller's workspace."""
    row = (_ITEM_FOR_UPDATE if lock else _ITEM_PLAIN).first(conn, {"item": item_id, "ws": ctx.workspace})
    return None if row is None else _item(row)


def load_stale_work(
    conn: Connection, ctx: Context, project: str, caller: str | None, suspects: Collection[str | None] | None = None
) -> domain.StaleWork:
    """The project's items whose non-human worker is stale, locked, with their issues' leases.

    Reads only the project's claimed/running items (``ix_work_items_live_key`` on PostgreSQL,
    ``ix_work_items_queue`` on SQLite), unless ``suspects`` (their workers, read with the
    caller's session) are given. Lock
    order: the workers' sessions (sorted), their items, then the leases of their issues.
    """
    key = live_key(ctx.workspace, project, "active")
    if suspects is None:
        params = {"ws": ctx.workspace, "project": project, "cutoff": ctx.cutoff_us, "key": key}
        suspects = {r[0] for r in _SUSPECTS.rows(conn, params)}
    worker_ids = sorted(s for s in suspects if s is not None and s != caller)
    if not worker_ids:
        return domain.StaleWork()
    workers: dict[str, SessionState] = {}
    for sid in worker_ids:  # sorted: concurrent recoveries lock in one order
        s = load_session(conn, ctx, sid, lock=True, own=False)
        if s is not None:
            workers[sid] = s
    if conn.dialect.name == "sqlite":
        of_workers = (
            (work_items.c.workspace == ctx.workspace)
            & (work_items.c.project == project)
            & work_items.c.status.in_(domain.ACTIVE)
            & work_items.c.session_id.in_(worker_ids)
        )
    else:  # by the live keys, like _SUSPECTS
        of_workers = (literal_column(PG_LIVE_KEY) == key) & unindexed(work_items.c.session_id).in_(worker_ids)
    rows = conn.execute(select(*_ITEM_COLUMNS).where(of_workers).order_by(work_items.c.item_id).with_for_update()).all()
    stale = domain.stale_items((_item(r) for r in rows), workers, ctx, caller)
    issues_of = dict.fromkeys(i.issue for i in stale if i.issue is not None)
    return domain.StaleWork(stale, {issue: load_lease(conn, ctx, issue, lock=True) for issue in issues_of})


def _pages(
    conn: Connection,
    first: Prepared,
    then: Prepared,
    params: dict[str, Any],
    after: domain.ItemState | None,
    on_page: Callable[[list[domain.ItemState]], None],
) -> Iterator[list[domain.ItemState]]:
    """Pages of items in pull order (after ``after``), read by ``first`` then ``then``;
    ``on_page`` sees each before its items are yielded.

    Pages grow (4, 32, then ``PAGE``): a pull usually takes one of the first items, and
    every row a page reads is decoded and, on PostgreSQL, locked until commit (``SKIP
    LOCKED``: rows others lock are skipped).
    """
    pages = 0
    while True:
        size = FIRST_PAGES[pages] if pages < len(FIRST_PAGES) else PAGE
        if after is None:
            rows = first.rows(conn, {**params, "page": size})
        else:
            place = {"priority": after.priority, "priority2": after.priority, "after": after.enqueued_position}
            rows = then.rows(conn, {**params, **place, "page": size})
        page = [_item(r) for r in rows]
        on_page(page)
        yield page
        if len(page) < size:
            return
        after = page[-1]
        pages += 1


class QueuedItems:
    """:class:`eventcoord.domain.queue.QueuedItems`: a project's queued items in selection
    order, a page at a time, without those on issues others hold (``caller``: who pulls;
    ``recovered``: the issues its recovery released, still held in the read model while it
    decides, read on their own); once narrowed, only those a pull at the cap may take."""

    def __init__(
        self,
        conn: Connection,
        ctx: Context,
        project: str,
        on_page: Callable[[list[domain.ItemState]], None],
        *,
        caller: str,
        recovered: Collection[str],
    ) -> None:
        self.conn, self.ctx, self.project, self.on_page = conn, ctx, project, on_page
        self.caller, self.recovered = caller, sorted(recovered)
        self._only: frozenset[str] | None = None

    def narrow(self, issues: Collection[str]) -> None:
        self._only = frozenset(issues)

    def __iter__(self) -> Iterator[domain.ItemState]:
        ws, project = self.ctx.workspace, self.project
        params = {
            "ws": ws,
            "project": project,
            "key": live_key(ws, project, "queued"),
            "me": self.caller,
            "mine": held_key(ws, project, self.caller),
        }
        free = itertools.chain.from_iterable(_pages(self.conn, _FIRST_PAGE, _NEXT_PAGE, params, None, self.on_page))
        last: domain.ItemState | None = None
        for item in heapq.merge(free, *(self._on_issue(i, None) for i in self.recovered), key=lambda i: i.order):
            if self._only is not None:  # the rest: without an issue, or on one of those
                yield from self._narrowed(last)
                return
            if last is None or item.item_id != last.item_id:  # (an old snapshot's item may be in both)
                yield item
            last = item

    def _on_issue(self, issue: str | None, after: domain.ItemState | None) -> Iterator[domain.ItemState]:
        """The project's ready items on ``issue`` (None: without one) after ``after``, whoever holds it."""
        ws, project = self.ctx.workspace, self.project
        params = {"ws": ws, "project": project, "issue": issue, "qkey": queued_issue_key(ws, project, issue)}
        pages = _pages(self.conn, _ON_ISSUE_FIRST, _ON_ISSUE_NEXT, params, after, self.on_page)
        return itertools.chain.from_iterable(pages)

    def _narrowed(self, after: domain.ItemState | None) -> Iterator[domain.ItemState]:
        """The queued items after ``after`` without an issue or on one of the narrowed issues."""
        assert self._only is not None
        streams = [self._on_issue(issue, after) for issue in (None, *sorted(self._only))]
        yield from heapq.merge(*streams, key=lambda i: i.order)


class WorkReads:
    """:class:`eventcoord.domain.queue.WorkReads` on a connection, for one (locked) project."""

    def __init__(self, conn: Connection, ctx: Context, project: str, wip_limit: int | None = None) -> None:
        self.conn, self.ctx, self.project, self.wip_limit = conn, ctx, project, wip_limit
        #: The workers of the project's active items that were stale, read with the caller's
        #: session (PostgreSQL's pull): ``stale_work`` reads them otherwise.
        self.suspects: Collection[str | None] | None = None
        # What a pull asks of the queued items, read a page at a time (``read_ahead``) and
        # kept for the command: the blockers' statuses (an item asked for and missing has
        # none), and the exclusive claims that could overlap the paths asked for so far.
        self._status: dict[str, str] = {}
        self._status_read: set[str] = set()
        self._claims: dict[str, dict[tuple[str, str | None], domain.FileClaimView]] = {}

    def stale_work(self, caller: str | None) -> domain.StaleWork:
        return load_stale_work(self.conn, self.ctx, self.project, caller, self.suspects)

    def locked_item(self, item_id: str) -> domain.ItemState | None:
        return load_item(self.conn, self.ctx, item_id, lock=True)

    def queued(self, caller: str, recovered: Collection[str]) -> QueuedItems:
        return QueuedItems(self.conn, self.ctx, self.project, self.read_ahead, caller=caller, recovered=recovered)

    def read_ahead(self, page: Sequence[domain.ItemState]) -> None:
        """Read what a pull asks of a page's items for the whole page: its blockers' statuses
        and the claims that could block its paths, a statement or three each, not per item
        (a queue whose first items are blocked cost a pull a round trip per item)."""
        self._read_statuses({b for item in page for b in item.blocked_by})
        self._read_claims({p for item in page for p in item.paths})

    def statuses(self, item_ids: list[str]) -> Mapping[str, str]:
        self._read_statuses(item_ids)
        return {i: self._status[i] for i in item_ids if i in self._status}

    def _read_statuses(self, item_ids: Collection[str]) -> None:
        unread = sorted(set(item_ids) - self._status_read)
        if not unread:
            return
        self._status_read.update(unread)
        self._status.update(statuses(self.conn, self.ctx.workspace, unread))

    def exclusive_claims(self, paths: Sequence[str]) -> list[domain.FileClaimView]:
        """Unreleased exclusive file claims of the workspace that could overlap ``paths`` (and
        the paths this command asked for before), with their holders' liveness: the probes
        of claim_files (never every live claim).

        A share lock on the workspace row (claim_files locks it FOR UPDATE) keeps the claims
        from changing under this decision on PostgreSQL.
        """
        self._read_claims(paths)
        return list({key: c for p in paths for key, c in self._claims[p].items()}.values())

    def _read_claims(self, paths: Collection[str]) -> None:
        """The claims that could overlap each of ``paths`` not read yet, in one probe of
        them all, each kept with the paths it could overlap (one literal prefix extends the
        other: the condition ``overlap_candidates`` reads by)."""
        unread = sorted(set(paths) - self._claims.keys())
        if not unread:
            return
        if not self._claims:  # held until commit: taken once
            _SHARE_WORKSPACE.first(self.conn, {"ws": self.ctx.workspace})
        held = [h for h in overlap_candidates(self.conn, self.ctx, unread) if h.exclusive]
        holders = load_sessions(self.conn, self.ctx, {h.session_id for h in held if h.session_id is not None})
        asked = [(p, literal_prefix(p), self._claims.setdefault(p, {})) for p in unread]
        for h in held:
            live = (s := holders.get(h.session_id or "")) is not None and self.ctx.is_live(s.last_seen_us, s.ended_us)
            view, prefix = domain.FileClaimView(h.path, h.session_id, live), literal_prefix(h.path)
            for _, asked_prefix, found in asked:
                if prefix.startswith(asked_prefix) or asked_prefix.startswith(prefix):
                    found[(h.path, h.session_id)] = view

    def issue(self, issue: str) -> IssueView:
        return load_issue_view(self.conn, self.ctx, issue, lock=True)

    def live_leases(self, issue: str) -> int:
        return live_lease_count(self.conn, self.ctx, self.project, issue, self.wip_limit)

    def held_issues(self, session_id: str) -> frozenset[str]:
        return frozenset(r[0] for r in _HELD_ISSUES.rows(self.conn, {"sid": session_id, "ws": self.ctx.workspace}))

    def lease(self, issue: str) -> LeaseState | None:
        return load_lease(self.conn, self.ctx, issue, lock=True)

    def issue_line(self, issue: str) -> IssueLine | None:
        return issue_line(self.conn, self.ctx, issue, self.project)

    def other_active_items(self, item: domain.ItemState) -> int:
        return int(_OTHER_ACTIVE.scalar(self.conn, {"sid": item.session_id, "issue": item.issue, "item": item.item_id}))


def enqueue_work(conn: Connection, ctx: Context, cmd: EnqueueWork) -> Decision:
    wip_limit = lock_project(conn, ctx, cmd.project)
    existing: list[str] = []
    if cmd.blocked_by:
        # Share-locked: a blocker in another project (whose guard this does not take) cannot
        # finish between the read model's count of what the new item waits on and its commit;
        # else its count-down would miss the new item, which would wait for ever.
        existing = list(
            conn.execute(
                select(work_items.c.item_id)
                .where(
                    (unindexed(work_items.c.workspace) == ctx.workspace)
                    & work_items.c.item_id.in_(sorted(set(cmd.blocked_by)))
                )
                .with_for_update(read=True)
            ).scalars()
        )
    issue_project = None
    if cmd.issue is not None:
        issue_project = _ISSUE_PROJECT.scalar(conn, {"ws": ctx.workspace, "issue": cmd.issue})
    state = domain.EnqueueState(existing, issue_project, WorkReads(conn, ctx, cmd.project, wip_limit))
    return domain.decide_enqueue_work(state, cmd, ctx)


def _session_locked(conn: Connection, ctx: Context, session_id: str, reads: WorkReads) -> SessionState | None:
    """The caller's session, locked, once its project's guard is held; on PostgreSQL with the
    project's suspects (``reads.suspects``) in the same round trip."""
    if conn.dialect.name != "postgresql":
        return load_session(conn, ctx, session_id, lock=True)
    params = {
        "sid": session_id,
        "ws": ctx.workspace,
        "cutoff": ctx.cutoff_us,
        "key": live_key(ctx.workspace, reads.project, "active"),
    }
    row = _SESSION_AND_SUSPECTS.first(conn, params)
    if row is None:
        return None
    reads.suspects = set(row[-1] or ())
    return own_session(ctx, row[:-1])


def claim_next_work(conn: Connection, ctx: Context, cmd: ClaimNextWork) -> Decision:
    wip_limit = lock_project(conn, ctx, cmd.project)
    reads = WorkReads(conn, ctx, cmd.project, wip_limit)
    session = _session_locked(conn, ctx, cmd.session_id, reads)
    state = domain.ClaimNextState(session, wip_limit, reads)
    return domain.decide_claim_next_work(state, cmd, ctx)


def _transition_state(conn: Connection, ctx: Context, item_id: str, session_id: str | None) -> domain.TransitionState:
    """The item (nothing else when it is missing), its project locked, the caller's session locked."""
    item = load_item(conn, ctx, item_id)
    if item is None:
        return domain.TransitionState(None, None)
    wip_limit = lock_project(conn, ctx, item.project)
    reads = WorkReads(conn, ctx, item.project, wip_limit)
    session = _session_locked(conn, ctx, session_id, reads) if session_id is not None else None
    return domain.TransitionState(item, session, reads)


def start_work(conn: Connection, ctx: Context, cmd: StartWork) -> Decision:
    return domain.decide_start_work(_transition_state(conn, ctx, cmd.item_id, cmd.session_id), cmd, ctx)


def finish_work(conn: Connection, ctx: Context, cmd: FinishWork) -> Decision:
    return domain.decide_finish_work(_transition_state(conn, ctx, cmd.item_id, cmd.session_id), cmd, ctx)
