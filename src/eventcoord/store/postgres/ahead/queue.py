"""PostgreSQL's read-ahead of the queue's pulls and transitions, and the loaders that use it.

A batch locks the pulls' project guards (and the transitions' items' project guards) ahead,
then reads what each reads next in one statement for them all; the substitutes here build
the same states as ``reads.queue``'s loaders from those rows, or fall back to them. A queue
command forgets the reads made under the project guard it takes: it may write those rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

from eventcoord.commands import ClaimNextWork, EnqueueWork, FinishWork, StartWork
from eventcoord.context import Context
from eventcoord.domain import queue as domain
from eventcoord.domain import streams
from eventcoord.domain.sessions import SessionState
from eventcoord.projections.queue import PG_LIVE_KEY, held_key, live_key
from eventcoord.reads import queue as reads
from eventcoord.reads.common import SESSION_COLUMNS, own_session
from eventcoord.reads.issues import project_rules
from eventcoord.reads.queue import FIRST_PAGES, ITEM_COLUMNS, STALE_SUSPECTS, WorkReads, item_state
from eventcoord.store.loaders import substitute
from eventcoord.store.postgres import held_locks, rows_ahead
from eventcoord.store.postgres.ahead import declared_ahead
from eventcoord.store.postgres.held_locks import GuardLock
from eventcoord.store.postgres.rows_ahead import RowsAhead
from eventcoord.store.prepared import Prepared

#: PostgreSQL: what a pull reads once its project's guard is held, for many pulls at once
#: (every parameter a list, one entry per pull; rows by ``n``, the entry's ordinal; the
#: batch's ``cutoff``), once the batch holds their projects' guards (``store/postgres/rows_ahead.py``):
#: the project's rules, the project's suspects (``_SESSION_AND_SUSPECTS``'s array), the
#: caller's session, locked, and the first page of ready items in pull order, locked
#: ``SKIP LOCKED`` (``_FIRST_PAGE``): one row per item, or one of NULLs when there is none.
_PULLS_AHEAD = Prepared(
    lambda d: text(
        "SELECT a.n, p.wip_limit, p.lock_delay_seconds, p.agent_wip_limit,"
        f" {STALE_SUSPECTS.format(ws='a.ws', project='a.project')},"
        f" {', '.join('c.' + c.name for c in SESSION_COLUMNS)},"
        f" {', '.join('q.' + c.name for c in ITEM_COLUMNS)}"
        " FROM unnest(CAST(:ws AS text[]), CAST(:project AS text[]), CAST(:sid AS text[]),"
        " CAST(:queued AS text[]), CAST(:mine AS text[]))"
        " WITH ORDINALITY AS a(ws, project, sid, queued, mine, n)"
        # each a lateral probe by its key (``OFFSET 0``: never flattened into a join that a
        # generic plan could answer by reading a whole table)
        " LEFT JOIN LATERAL (SELECT * FROM projects WHERE projects.workspace = a.ws"
        " AND projects.project = a.project OFFSET 0) AS p ON true"
        # by its id alone (the primary key), as ``_SESSION_AND_SUSPECTS`` reads it
        " LEFT JOIN LATERAL (SELECT * FROM sessions AS c WHERE c.session_id = a.sid AND (c.workspace || '') = a.ws"
        " FOR UPDATE) AS c ON true"
        f" LEFT JOIN LATERAL ({_first_page_of('a.queued', 'a.mine')}) AS q ON true"
        " ORDER BY a.n, q.priority DESC, q.enqueued_position"
    )
)
#: PostgreSQL: the guards of the projects of many work items (``ws`` and ``key``, the items,
#: in pairs) locked at once for a batch's transitions (start_work, finish_work), skipping any
#: another transaction holds. Rows: workspace, guard key, item (``held_locks.item_guard``).
#: The key is ``streams.project``'s, built in SQL from its prefix.
_ITEM_GUARDS_AHEAD = Prepared(
    lambda d: text(
        "SELECT g.workspace, g.key, w.item"
        " FROM unnest(CAST(:ws AS text[]), CAST(:key AS text[])) AS w(workspace, item)"
        # each a lateral probe by its key (never a join that reads every item or guard)
        " CROSS JOIN LATERAL (SELECT project FROM work_items WHERE work_items.item_id = w.item"
        " AND (work_items.workspace || '') = w.workspace OFFSET 0) AS i"
        " CROSS JOIN LATERAL (SELECT workspace, key FROM guards WHERE guards.workspace = w.workspace"
        f" AND guards.key = '{streams.project('')}' || i.project OFFSET 0 FOR UPDATE SKIP LOCKED) AS g"
    ),
    writes="guards",
)
#: PostgreSQL: what a transition reads, for many at once (``ws``, ``item``, ``sid``: lists;
#: rows by ``n``; the batch's ``cutoff``), once the batch holds the guards of their items'
#: projects: the item, locked (``load_item``, then ``WorkReads.locked_item``), its project's
#: rules and suspects, and the caller's session, locked (``_SESSION_AND_SUSPECTS``).
_TRANSITIONS_AHEAD = Prepared(
    lambda d: text(
        f"SELECT a.n, {', '.join('i.' + c.name for c in ITEM_COLUMNS)},"
        " p.wip_limit, p.lock_delay_seconds, p.agent_wip_limit,"
        f" {STALE_SUSPECTS.format(ws='a.ws', project='i.project')},"
        f" {', '.join('c.' + c.name for c in SESSION_COLUMNS)}"
        " FROM unnest(CAST(:ws AS text[]), CAST(:item AS text[]), CAST(:sid AS text[]))"
        " WITH ORDINALITY AS a(ws, item, sid, n)"
        f" LEFT JOIN LATERAL (SELECT {', '.join(c.name for c in ITEM_COLUMNS)} FROM work_items"
        " WHERE work_items.item_id = a.item AND (work_items.workspace || '') = a.ws FOR UPDATE) AS i ON true"
        " LEFT JOIN LATERAL (SELECT * FROM projects WHERE projects.workspace = a.ws"
        " AND projects.project = i.project OFFSET 0) AS p ON true"
        " LEFT JOIN LATERAL (SELECT * FROM sessions AS c WHERE c.session_id = a.sid AND (c.workspace || '') = a.ws"
        " FOR UPDATE) AS c ON true"
        " ORDER BY a.n"
    )
)


def _first_page_of(queued: str, mine: str) -> str:
    """PostgreSQL: ``_FIRST_PAGE``'s first page, its keys the SQL expressions given."""
    columns = ", ".join(c.name for c in ITEM_COLUMNS)
    order = f" ORDER BY priority DESC, enqueued_position LIMIT {FIRST_PAGES[0]}"
    parts = (
        f"SELECT {columns} FROM (SELECT {columns} FROM work_items WHERE {PG_LIVE_KEY} = {key}"
        f"{order} FOR UPDATE SKIP LOCKED) AS {name}"
        for key, name in ((queued, "ready"), (mine, "mine"))
    )
    return " UNION ALL ".join(parts) + order


def pull_rows_ahead(workspace: str, cmd: ClaimNextWork) -> RowsAhead:
    """What a pull reads once its project's guard is held, which a PostgreSQL batch may
    read ahead for all its pulls (``store/postgres/rows_ahead.py``).

    Its project's items are named as one row of ``work_items`` (by the project), which no
    write of an item (named by its id) names: instead every command that writes a
    project's items forgets the reads made under the project's guard
    (:func:`_project_locked`), and ending a session, which writes items without that
    guard, writes ``sessions`` too, which forgets every read of ``sessions``.
    """
    ws, project, sid = workspace, cmd.project, cmd.session_id
    return RowsAhead(
        _PULLS_AHEAD,
        (
            ("ws", ws),
            ("project", project),
            ("sid", sid),
            ("queued", live_key(ws, project, "queued")),
            ("mine", held_key(ws, project, sid)),
        ),
        (("projects", (ws, project)), ("sessions", (sid,)), ("work_items", ("project", ws, project))),
        held_locks.guard(ws, streams.project(project)),
        many=True,
        cutoff=True,
        first_under=True,
        alone=True,  # its own reads: rules, session and suspects, the first page
    )


def _project_locked(conn: Connection, ctx: Context, project: str) -> None:
    """A queue command on ``project``, which may write its items, is about to take its guard:
    the reads ahead made under it for other commands may no longer hold (:func:`pull_rows_ahead`)."""
    rows_ahead.forget_under(conn, held_locks.guard(ctx.workspace, streams.project(project)))


def _session_ahead(ctx: Context, row: Sequence[Any]) -> SessionState | None:
    """The caller's session from its columns read ahead (NULLs: none)."""
    return None if row[0] is None else own_session(ctx, row)


#: Where ``_PULLS_AHEAD``'s columns are (after the ordinal): rules, suspects, session, item.
_AT_RULES = slice(0, 3)
_AT_SUSPECTS = 3
_AT_SESSION = slice(4, 4 + len(SESSION_COLUMNS))
_AT_ITEM = slice(_AT_SESSION.stop, None)


def _pull_read_ahead(conn: Connection, ctx: Context, cmd: ClaimNextWork) -> tuple[Any, ...] | None:
    """The pull's rows as the batch read them ahead, if they still hold."""
    wanted = declared_ahead(conn, _PULLS_AHEAD)
    if wanted is None or cmd.session_id in rows_ahead.revived(conn):
        return None  # a sign of life since: its session's row is not what it read
    return rows_ahead.read(conn, wanted, others_life_ok=True, own=cmd.session_id)


@substitute(reads.pull_state)
def pull_state(conn: Connection, ctx: Context, cmd: ClaimNextWork) -> domain.ClaimNextState:
    """:func:`reads.queue.pull_state`, from the rows the batch read ahead for the pull when
    they still hold (the batch holds the project's guard)."""
    ahead = _pull_read_ahead(conn, ctx, cmd)
    _project_locked(conn, ctx, cmd.project)
    if ahead is None:
        return reads.pull_state.plain(conn, ctx, cmd)
    first = ahead[0]
    wip_limit = project_rules(first[_AT_RULES]).wip_limit
    page = [item_state(row[_AT_ITEM]) for row in ahead if row[_AT_ITEM][0] is not None]
    work = WorkReads(conn, ctx, cmd.project, wip_limit, suspects=set(first[_AT_SUSPECTS] or ()), first_page=page)
    return domain.ClaimNextState(_session_ahead(ctx, first[_AT_SESSION]), wip_limit, work)


@substitute(reads.enqueue_state)
def enqueue_state(conn: Connection, ctx: Context, cmd: EnqueueWork) -> domain.EnqueueState:
    """:func:`reads.queue.enqueue_state`, after forgetting the reads ahead made under its
    project's guard (it writes the project's items)."""
    _project_locked(conn, ctx, cmd.project)
    return reads.enqueue_state.plain(conn, ctx, cmd)


def transition_lock_ahead(workspace: str, item_id: str) -> GuardLock:
    """What a transition locks first, its item's project's guard, which a PostgreSQL batch
    can lock ahead for all its transitions."""
    return GuardLock(_ITEM_GUARDS_AHEAD, workspace, item_id, via=held_locks.ITEM_GUARDS)


def transition_rows_ahead(workspace: str, cmd: StartWork | FinishWork) -> RowsAhead:
    """What a transition reads once its item's project's guard is held, which a PostgreSQL
    batch may read ahead for all its transitions (``store/postgres/rows_ahead.py``).

    Its project's rows are named through its item: the item's own writes by its id; its
    project's other items by the guard it was read under (:func:`pull_rows_ahead`'s rule;
    the batch files a read under an item's guard with its project's guard); the project's
    rules by no key any write names: they are written only by SQL the batch cannot place,
    which forgets every read ahead.
    """
    ws, item, sid = workspace, cmd.item_id, cmd.session_id
    return RowsAhead(
        _TRANSITIONS_AHEAD,
        (("ws", ws), ("item", item), ("sid", sid)),
        (("work_items", (item,)), ("sessions", (sid,)), ("projects", ("item", ws, item))),
        held_locks.item_guard(ws, item),
        cutoff=True,
        first_under=True,
        alone=True,  # its own reads: the item, rules, session and suspects, the item locked
    )


#: Where ``_TRANSITIONS_AHEAD``'s columns are (after the ordinal): item, rules, suspects, session.
_AT_T_ITEM = slice(0, len(ITEM_COLUMNS))
_AT_T_RULES = slice(_AT_T_ITEM.stop, _AT_T_ITEM.stop + 3)
_AT_T_SUSPECTS = _AT_T_RULES.stop
_AT_T_SESSION = slice(_AT_T_SUSPECTS + 1, None)


def _transition_read_ahead(conn: Connection, ctx: Context, session_id: str | None) -> domain.TransitionState | None:
    """The transition's state as the batch read it ahead, if it still holds (None: read it)."""
    wanted = declared_ahead(conn, _TRANSITIONS_AHEAD)
    if wanted is None or session_id in rows_ahead.revived(conn):
        return None  # a sign of life since: its session's row is not what it read
    row = rows_ahead.read(conn, wanted, others_life_ok=True, own=session_id)
    if row is None or row[0] is None:  # (a missing item: read for itself, it costs one probe)
        return None
    item = item_state(row[_AT_T_ITEM])
    _project_locked(conn, ctx, item.project)
    wip_limit = project_rules(row[_AT_T_RULES]).wip_limit
    work = WorkReads(conn, ctx, item.project, wip_limit, suspects=set(row[_AT_T_SUSPECTS] or ()), locked=(item,))
    session = _session_ahead(ctx, row[_AT_T_SESSION]) if session_id is not None else None
    return domain.TransitionState(item, session, work)


@substitute(reads.transition_state)
def transition_state(conn: Connection, ctx: Context, item_id: str, session_id: str | None) -> domain.TransitionState:
    """:func:`reads.queue.transition_state`, from the row the batch read ahead for the
    transition when it still holds; else read, forgetting the reads ahead made under its
    item's project's guard (nothing reads them before the decision)."""
    ahead = _transition_read_ahead(conn, ctx, session_id)
    if ahead is not None:
        return ahead
    state = reads.transition_state.plain(conn, ctx, item_id, session_id)
    if state.item is not None:
        _project_locked(conn, ctx, state.item.project)
    return state
