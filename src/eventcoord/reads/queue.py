"""The queue's state loading: the items, a project's stale work, its queued items in pull order.

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
from sqlalchemy import Connection, bindparam, func, literal_column, or_, select, text
from sqlalchemy.sql import Executable

from eventcoord.commands import ClaimNextWork, EnqueueWork
from eventcoord.context import Context
from eventcoord.domain import queue as domain
from eventcoord.domain.handoff import IssueLine
from eventcoord.domain.issues import IssueView, LeaseState
from eventcoord.domain.paths import literal_prefix
from eventcoord.domain.sessions import SessionState
from eventcoord.projections import keys
from eventcoord.projections.queue import (
    ONE_ITEM,
    PG_LIVE_KEY,
    PG_QUEUED_ISSUE_KEY,
    held_key,
    live_key,
    queued_issue_key,
    statuses,
)
from eventcoord.projections.sessions import note_worker
from eventcoord.projections.tables import issues, leases, work_items, working
from eventcoord.reads.common import SESSION_COLUMNS, WS, load_session, load_sessions, own_session
from eventcoord.reads.files import overlap_candidates
from eventcoord.reads.issues import issue_line, live_lease_count, load_issue_view, load_lease, lock_project
from eventcoord.store.loaders import loader
from eventcoord.store.prepared import Prepared, indexed_by, unindexed
from eventcoord.store.schema import workspaces

PAGE = 100
FIRST_PAGES = (4, 32)

ITEM_COLUMNS = (
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


def item_state(row: Sequence[Any]) -> domain.ItemState:
    """An item from a row of ``ITEM_COLUMNS`` (a tuple: prebuilt statements give no names)."""
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

# By the primary key only: the workspace is checked, not searched by (``|| ''``; see
# projections/queue.py's ``_ITEM``).
_ITEM_SELECT = select(*ITEM_COLUMNS).where(
    (work_items.c.item_id == bindparam("item")) & (unindexed(work_items.c.workspace) == WS)
)
_ITEM_PLAIN = Prepared(lambda d: _ITEM_SELECT, rows=ONE_ITEM)  # (another item's writes may go with it)
_ITEM_FOR_UPDATE = Prepared(lambda d: _ITEM_SELECT.with_for_update(), rows=ONE_ITEM)
# The stale workers of a project: the non-human sessions that work on an item
# (``active_items > 0``) and were last seen at or before the cutoff, each with an item in
# work in the project, read from the sessions to their items (0018_stale_workers). The
# sessions are a range of ``ix_sessions_stale_workers``, which holds only the non-human
# sessions that work on something (``working()``): the live workers, however many, are not
# passed (walking the project's items in work and probing
# each one's session was not flat with load: 3,000 items in work made a pull six times
# slower). An ended session works on nothing (ending it re-queues its items), so the range
# of last signs of life is the whole of ``not_live_clause`` here. Each one's items are
# probed through ``ix_work_items_session`` (session, status), the one index that leads with
# the session (the project and workspace are checked, not searched by: ``|| ''``).
# PostgreSQL reads the index by ``PG_WORKER_KEY``, which no other index holds, and probes
# the items in a lateral subquery (``LIMIT 1``: never flattened into a join); SQLite's
# statement names its indexes.
#: A session's worker key on PostgreSQL, of the sessions aliased ``s``: its workspace while it
#: is not human and works on an item, NULL otherwise; ``ix_sessions_stale_workers`` is on it
#: (and partial on ``working()``, which its readers state too, as its planner needs).
PG_WORKER_KEY = keys.WORKER.sql("s")
_IN_WORK_OF = (
    "SELECT 1 FROM work_items AS w WHERE w.session_id = s.session_id AND w.status = '{status}'"
    " AND (w.project || '') = {{project}} AND (w.workspace || '') = s.workspace"
)
# (a probe per status: with ``status IN (…)`` PostgreSQL's generic plan searched the index by
# the session alone and filtered the statuses, walking every item a stale worker ever had)
_STALE_WORKERS = (
    "SELECT s.session_id FROM sessions AS s CROSS JOIN LATERAL"
    f" ({_IN_WORK_OF.format(status='claimed')} UNION ALL {_IN_WORK_OF.format(status='running')} LIMIT 1) AS held"
    f" WHERE {PG_WORKER_KEY} = {{ws}} AND {working('s')}"
    " AND s.last_seen_us <= CAST(:cutoff AS bigint)"
)
"""PostgreSQL: the stale workers of a project (``{ws}``, ``{project}``: SQL expressions)
at the batch's or command's cutoff."""
_STALE_WORKERS_SQLITE = (
    "SELECT s.session_id FROM sessions AS s INDEXED BY ix_sessions_stale_workers"
    f" WHERE s.workspace = :ws AND {working('s')} AND s.last_seen_us <= :cutoff"
    " AND EXISTS (SELECT 1 FROM work_items AS w INDEXED BY ix_work_items_session"
    " WHERE w.session_id = s.session_id AND w.status IN ('claimed', 'running')"
    " AND w.project = :project AND w.workspace = s.workspace)"
)
_SUSPECTS = Prepared(
    lambda d: text(
        _STALE_WORKERS_SQLITE
        if d == "sqlite"
        else _STALE_WORKERS.format(ws="CAST(:ws AS text)", project="CAST(:project AS text)")
    ),
    reads=("sessions", "work_items"),
)
STALE_SUSPECTS = "ARRAY(" + _STALE_WORKERS + ")"
"""PostgreSQL: the project's stale workers as an array (``_STALE_WORKERS``)."""
# PostgreSQL: a pull's session locked, with its project's suspects (``STALE_SUSPECTS``) in
# the same statement: one round trip where there were two. Both are read after the
# project's guard, which the pull took in a statement before.
_SESSION_AND_SUSPECTS = Prepared(
    lambda d: text(
        f"SELECT {', '.join('sessions.' + c.name for c in SESSION_COLUMNS)},"
        f" {STALE_SUSPECTS.format(ws='CAST(:ws AS text)', project='CAST(:project AS text)')}"
        " FROM sessions WHERE sessions.session_id = :sid AND (sessions.workspace || '') = :ws"
        " FOR UPDATE OF sessions"
    ),
    reads=("sessions", "work_items"),
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
    columns = ", ".join(c.name for c in ITEM_COLUMNS)
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
    return None if row is None else item_state(row)


def load_stale_work(
    conn: Connection, ctx: Context, project: str, caller: str | None, suspects: Collection[str | None] | None = None
) -> domain.StaleWork:
    """The project's items whose non-human worker is stale, locked, with their issues' leases.

    Reads only the project's claimed/running items (``ix_work_items_live_key`` on PostgreSQL,
    ``ix_work_items_queue`` on SQLite), unless ``suspects`` (their workers, read with the
    caller's session) are given. Lock
    order: the workers' sessions (sorted), their items, then the leases of their issues.
    """
    if suspects is None:
        params = {"ws": ctx.workspace, "project": project, "cutoff": ctx.cutoff_us}
        suspects = {r[0] for r in _SUSPECTS.rows(conn, params)}
    worker_ids = sorted(s for s in suspects if s is not None and s != caller)
    if not worker_ids:
        return domain.StaleWork()
    workers: dict[str, SessionState] = {}
    for sid in worker_ids:  # sorted: concurrent recoveries lock in one order
        s = load_session(conn, ctx, sid, lock=True, own=False)
        if s is not None:
            workers[sid] = s
    # Each worker's items in work by ``ix_work_items_session``, the only index that leads
    # with the session (the project's items in work, however many, are not walked), a
    # search of (session, status) per status: with ``status IN (…)`` PostgreSQL searched
    # by the session alone, walking every item a stale worker ever had.
    of_workers = (unindexed(work_items.c.project) == project) & (unindexed(work_items.c.workspace) == ctx.workspace)
    by_status = or_(
        *((work_items.c.session_id.in_(worker_ids) & (work_items.c.status == status)) for status in domain.ACTIVE)
    )
    rows = conn.execute(
        select(*ITEM_COLUMNS).where(of_workers & by_status).order_by(work_items.c.item_id).with_for_update()
    ).all()
    stale = domain.stale_items((item_state(r) for r in rows), workers, ctx, caller)
    issues_of = dict.fromkeys(i.issue for i in stale if i.issue is not None)
    return domain.StaleWork(stale, {issue: load_lease(conn, ctx, issue, lock=True) for issue in issues_of})


def _pages(
    conn: Connection,
    first: Prepared,
    then: Prepared,
    params: dict[str, Any],
    after: domain.ItemState | None,
    on_page: Callable[[list[domain.ItemState]], None],
    read: list[domain.ItemState] | None = None,
) -> Iterator[list[domain.ItemState]]:
    """Pages of items in pull order (after ``after``), read by ``first`` then ``then``;
    ``on_page`` sees each before its items are yielded. ``read``: the first page (of
    ``FIRST_PAGES[0]``, after no item), read ahead by the batch.

    Pages grow (4, 32, then ``PAGE``): a pull usually takes one of the first items, and
    every row a page reads is decoded and, on PostgreSQL, locked until commit (``SKIP
    LOCKED``: rows others lock are skipped).
    """
    pages = 0
    while True:
        size = FIRST_PAGES[pages] if pages < len(FIRST_PAGES) else PAGE
        if read is not None and pages == 0 and after is None:
            page = read
        elif after is None:
            page = [item_state(r) for r in first.rows(conn, {**params, "page": size})]
        else:
            place = {"priority": after.priority, "priority2": after.priority, "after": after.enqueued_position}
            page = [item_state(r) for r in then.rows(conn, {**params, **place, "page": size})]
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
        first_page: list[domain.ItemState] | None = None,
    ) -> None:
        self.conn, self.ctx, self.project, self.on_page = conn, ctx, project, on_page
        self.caller, self.recovered = caller, sorted(recovered)
        self.first_page = first_page
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
        pages = _pages(self.conn, _FIRST_PAGE, _NEXT_PAGE, params, None, self.on_page, self.first_page)
        free = itertools.chain.from_iterable(pages)
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


def _set_of(suspects: Collection[str | None] | None) -> frozenset[str | None] | None:
    return None if suspects is None else frozenset(suspects)


class WorkReads:
    """:class:`eventcoord.domain.queue.WorkReads` on a connection, for one (locked) project."""

    def __init__(
        self,
        conn: Connection,
        ctx: Context,
        project: str,
        wip_limit: int | None = None,
        *,
        suspects: Collection[str | None] | None = None,
        first_page: list[domain.ItemState] | None = None,
        locked: Collection[domain.ItemState] = (),
    ) -> None:
        self.conn, self.ctx, self.project, self.wip_limit = conn, ctx, project, wip_limit
        #: The workers of the project's active items that were stale, read with the caller's
        #: session (PostgreSQL's pull): ``stale_work`` reads them otherwise.
        self.suspects = suspects
        #: The first page of the project's ready items in pull order, read ahead by a
        #: PostgreSQL batch for the caller: ``queued`` reads it otherwise.
        self.first_page = first_page
        #: Items read locked already (a transition's own, read ahead by a PostgreSQL batch).
        self.locked: dict[str, domain.ItemState] = {i.item_id: i for i in locked}
        # What a pull asks of the queued items, read a page at a time (``read_ahead``) and
        # kept for the command: the blockers' statuses (an item asked for and missing has
        # none), and the exclusive claims that could overlap the paths asked for so far.
        self._status: dict[str, str] = {}
        self._status_read: set[str] = set()
        self._claims: dict[str, dict[tuple[str, str | None], domain.FileClaimView]] = {}

    def __eq__(self, other: object) -> bool:
        """Two readers are equal when they read the same project of one workspace, under the
        same cap, with the same suspects taken (what one read ahead, the first page and the
        items locked, the other reads on demand, by the same rule)."""
        if not isinstance(other, WorkReads):
            return NotImplemented
        mine = (self.ctx.workspace, self.project, self.wip_limit, _set_of(self.suspects))
        return mine == (other.ctx.workspace, other.project, other.wip_limit, _set_of(other.suspects))

    __hash__ = None  # type: ignore[assignment]  # (mutable: never a key)

    def stale_work(self, caller: str | None) -> domain.StaleWork:
        return load_stale_work(self.conn, self.ctx, self.project, caller, self.suspects)

    def locked_item(self, item_id: str) -> domain.ItemState | None:
        item = self.locked.get(item_id) or load_item(self.conn, self.ctx, item_id, lock=True)
        if item is not None:  # its worker as read locked: what its finish takes one from
            note_worker(self.conn, item_id, item.session_id)
        return item

    def queued(self, caller: str, recovered: Collection[str]) -> QueuedItems:
        return QueuedItems(
            self.conn,
            self.ctx,
            self.project,
            self.read_ahead,
            caller=caller,
            recovered=recovered,
            first_page=self.first_page,
        )

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


def _session_locked(conn: Connection, ctx: Context, session_id: str, reads: WorkReads) -> SessionState | None:
    """The caller's session, locked, once its project's guard is held; on PostgreSQL with the
    project's suspects (``reads.suspects``) in the same round trip."""
    if conn.dialect.name != "postgresql":
        return load_session(conn, ctx, session_id, lock=True)
    params = {"sid": session_id, "ws": ctx.workspace, "cutoff": ctx.cutoff_us, "project": reads.project}
    row = _SESSION_AND_SUSPECTS.first(conn, params)
    if row is None:
        return None
    reads.suspects = set(row[-1] or ())
    return own_session(ctx, row[:-1])


@loader
def enqueue_state(conn: Connection, ctx: Context, cmd: EnqueueWork) -> domain.EnqueueState:
    """What enqueue_work decides on, its project locked."""
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
    return domain.EnqueueState(existing, issue_project, WorkReads(conn, ctx, cmd.project, wip_limit))


@loader
def pull_state(conn: Connection, ctx: Context, cmd: ClaimNextWork) -> domain.ClaimNextState:
    """What claim_next_work decides on: its project locked, the caller's session locked."""
    wip_limit = lock_project(conn, ctx, cmd.project)
    reads = WorkReads(conn, ctx, cmd.project, wip_limit)
    session = _session_locked(conn, ctx, cmd.session_id, reads)
    return domain.ClaimNextState(session, wip_limit, reads)


@loader
def transition_state(conn: Connection, ctx: Context, item_id: str, session_id: str | None) -> domain.TransitionState:
    """What start_work and finish_work decide on: the item (nothing else when it is
    missing), its project locked, the caller's session locked."""
    item = load_item(conn, ctx, item_id)
    if item is None:
        return domain.TransitionState(None, None)
    wip_limit = lock_project(conn, ctx, item.project)
    reads = WorkReads(conn, ctx, item.project, wip_limit)
    session = _session_locked(conn, ctx, session_id, reads) if session_id is not None else None
    return domain.TransitionState(item, session, reads)


def lock_other_worker(conn: Connection, ctx: Context, state: domain.TransitionState, caller: str | None) -> None:
    """Before an admin's finish of another's item: the item read locked, then its worker's row.

    That finish takes one from the worker's count of items in work, which a PostgreSQL
    batch writes with its end statement, under the counter's lock
    (projections.sessions.WorkCounts): the worker's row is locked here, as a worker's own is
    by its finish's read, so that statement waits for no one.
    """
    item, reads = state.item, state.reads
    if item is None or not isinstance(reads, WorkReads) or item.session_id in (None, caller):
        return
    locked = reads.locked[item.item_id] = reads.locked_item(item.item_id) or item
    if locked.session_id not in (None, caller):
        load_session(conn, ctx, locked.session_id, lock=True, own=False)
