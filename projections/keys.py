"""The live keys: one expression per hot lookup of live rows, indexed on PostgreSQL.

A live key is a ``CASE`` over a row's columns that is NULL once the row stops being live.
PostgreSQL indexes exactly that expression (partial: key not null), and a statement that
compares it, naming no other column, has that one index to use with or without statistics
(docs/decisions/0006-one-index-per-lookup.md). Each key is defined here once: the
SQLAlchemy expression (the index, the Core statements, and ``sql`` for text statements) and
its Python twin (``twin``), from which the values the statements compare are built.
Constants are inline (never bound): a parameter in the expression would not match the index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, String, and_, case, column, func, table
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import Grouping
from sqlalchemy.sql.expression import ColumnClause, FromClause

_PG = PGDialect()  # type: ignore[no-untyped-call]

#: What separates the parts of a key (text holds no NUL; chr(1) sorts below any other).
SEP = "\x01"


class Const(ColumnClause[str]):
    """A text constant written into the statement, never a parameter: ``E'\\x01…'`` on
    PostgreSQL (as the indexes were created), a plain literal elsewhere."""

    inherit_cache = True

    def __init__(self, value: str) -> None:
        super().__init__(value, type_=String(), is_literal=True)
        self.value = value


@compiles(Const)
def _const(element: Const, compiler: SQLCompiler, **kw: Any) -> str:
    return "'" + element.value.replace("'", "''") + "'"


@compiles(Const, "postgresql")
def _const_pg(element: Const, compiler: SQLCompiler, **kw: Any) -> str:
    if SEP not in element.value:
        return "'" + element.value.replace("'", "''") + "'"
    escaped = element.value.replace("\\", "\\\\").replace("'", "\\'").replace(SEP, "\\x01")
    return f"E'{escaped}'"


class _Int(ColumnClause[int]):
    """An integer constant written into the statement."""

    inherit_cache = True

    def __init__(self, value: int) -> None:
        super().__init__(str(value), is_literal=True)


def _is(left: ColumnElement[Any], op: str, right: ColumnElement[Any]) -> ColumnElement[bool]:
    """``left op right`` in this order (an untyped column would let SQLAlchemy swap them, and
    PostgreSQL matches an index's expression as written)."""
    return left.op(op, precedence=5, is_comparison=True)(right)


def _concat(*parts: ColumnElement[Any]) -> ColumnElement[str]:
    out = parts[0]
    for p in parts[1:]:
        out = out.op("||", precedence=6, return_type=String())(p)
    return out


@dataclass(frozen=True)
class LiveKey:
    """One live key of ``table``: its index, its expression over a table or alias, its twin."""

    #: The PostgreSQL index on it.
    index: str
    table: str
    #: The columns the key reads (also its twin's keyword arguments).
    columns: tuple[str, ...]
    build: Callable[[Any], ColumnElement[str]]
    #: The key's value, computed in Python from a row's columns (None: not live).
    twin: Callable[..., str | None]

    def of(self, at: FromClause) -> ColumnElement[str]:
        """The key over ``at`` (the table, or an alias of it), in parentheses."""
        return Grouping(self.build(at.c))

    def sql(self, alias: str | None = None) -> str:
        """The key as PostgreSQL text, qualified by the table's name or ``alias``: for
        statements written as text. Rendered from the same expression as the index."""
        at: FromClause = table(self.table, *(column(c) for c in self.columns))
        if alias is not None:
            at = at.alias(alias)
        return str(self.of(at).compile(dialect=_PG))

    def value(self, **row: Any) -> str | None:
        """The twin over a row given by keyword (columns missing: None)."""
        return self.twin(**{c: row.get(c) for c in self.columns})


def _claim_prefix(c: Any) -> ColumnElement[str]:
    return case((c.released_us.is_(None), _concat(c.workspace, Const(SEP), c.literal_prefix)))


def _claim_prefix_twin(released_us: Any, workspace: str, literal_prefix: str) -> str | None:
    return None if released_us is not None else f"{workspace}{SEP}{literal_prefix}"


#: A file claim's workspace and literal prefix while unreleased: claim_files' overlap probes
#: (ranges of it, under the C collation: ``ix_file_claims_live_key``).
CLAIM_PREFIX = LiveKey(
    "ix_file_claims_live_key",
    "file_claims",
    ("released_us", "workspace", "literal_prefix"),
    _claim_prefix,
    _claim_prefix_twin,
)


def _claim_issue(c: Any) -> ColumnElement[str]:
    return case((c.released_us.is_(None), _concat(c.workspace, Const(SEP), c.issue)))


def _claim_issue_twin(released_us: Any, workspace: str, issue: str) -> str | None:
    return None if released_us is not None else f"{workspace}{SEP}{issue}"


#: A file claim's workspace and issue while unreleased: an issue's unreleased claims
#: (release_files and its read model).
CLAIM_ISSUE = LiveKey(
    "ix_file_claims_issue_live_key",
    "file_claims",
    ("released_us", "workspace", "issue"),
    _claim_issue,
    _claim_issue_twin,
)


def _ready(c: Any) -> ColumnElement[bool]:
    return and_(_is(c.status, "=", Const("queued")), _is(c.waiting_on, "=", _Int(0)))


def _work_live(c: Any) -> ColumnElement[str]:
    project = _concat(c.workspace, Const(SEP), c.project)
    return case(
        (and_(_ready(c), c.held_by.is_(None)), _concat(project, Const(f"{SEP}queued"))),
        (_ready(c), _concat(project, Const(f"{SEP}held{SEP}"), c.held_by)),
        (c.status.in_([Const("claimed"), Const("running")]), _concat(project, Const(f"{SEP}active"))),
    )


def _work_live_twin(status: str, waiting_on: int, held_by: str | None, workspace: str, project: str) -> str | None:
    ready = status == "queued" and waiting_on == 0
    if ready:
        return f"{workspace}{SEP}{project}{SEP}" + ("queued" if held_by is None else f"held{SEP}{held_by}")
    return f"{workspace}{SEP}{project}{SEP}active" if status in ("claimed", "running") else None


#: A work item's workspace, project and ``queued`` while queued, ready (``waiting_on = 0``)
#: and on no issue another holds; ``held\x01<session>`` while queued and ready on an issue
#: that session holds; ``active`` while claimed or running; NULL while it waits on a blocker
#: and once finished. The queue's lookups of a project's live items compare it by equality.
WORK_LIVE = LiveKey(
    "ix_work_items_live_key",
    "work_items",
    ("status", "waiting_on", "held_by", "workspace", "project"),
    _work_live,
    _work_live_twin,
)


def _work_queued_issue(c: Any) -> ColumnElement[str]:
    issue: ColumnElement[str] = func.coalesce(c.issue, Const(""))
    return case((_ready(c), _concat(c.workspace, Const(SEP), c.project, Const(SEP), issue)))


def _work_queued_issue_twin(
    status: str, waiting_on: int, workspace: str, project: str, issue: str | None
) -> str | None:
    return f"{workspace}{SEP}{project}{SEP}{issue or ''}" if status == "queued" and waiting_on == 0 else None


#: A work item's workspace, project and issue ('' for none) while queued and ready: a pull
#: at its project's cap reads the items without an issue, or on one issue, by it.
WORK_QUEUED_ISSUE = LiveKey(
    "ix_work_items_queued_issue_key",
    "work_items",
    ("status", "waiting_on", "workspace", "project", "issue"),
    _work_queued_issue,
    _work_queued_issue_twin,
)


def _work_on_issue(c: Any) -> ColumnElement[str]:
    return case(
        (and_(_is(c.status, "=", Const("queued")), c.issue.isnot(None)), _concat(c.workspace, Const(SEP), c.issue))
    )


def _work_on_issue_twin(status: str, issue: str | None, workspace: str) -> str | None:
    return f"{workspace}{SEP}{issue}" if status == "queued" and issue is not None else None


#: A queued item's workspace and issue (NULL without one): a lease's grant and release mark
#: the issue's queued items held and free by it.
WORK_ON_ISSUE = LiveKey(
    "ix_work_items_queued_on_issue",
    "work_items",
    ("status", "issue", "workspace"),
    _work_on_issue,
    _work_on_issue_twin,
)


def _declaring(c: Any) -> ColumnElement[str]:
    return case((c.ended_us.is_(None), _concat(c.workspace, Const(SEP), c.working_on)))


def _declaring_twin(ended_us: Any, workspace: str, working_on: str | None) -> str | None:
    return f"{workspace}{SEP}{working_on}" if ended_us is None and working_on is not None else None


#: A session's workspace and the issue it declares working on, until it ends: an issue's
#: live declarers (claim_issue) by equality.
DECLARING = LiveKey(
    "ix_sessions_declaring_key",
    "sessions",
    ("ended_us", "workspace", "working_on"),
    _declaring,
    _declaring_twin,
)


def working(c: Any) -> ColumnElement[bool]:
    """A non-human session that works on an item: the predicate of ``ix_sessions_stale_workers``."""
    return and_(_is(c.active_items, ">", _Int(0)), _is(c.kind, "<>", Const("human")))


def _worker(c: Any) -> ColumnElement[str]:
    return case((working(c), c.workspace))


def _worker_twin(active_items: int, kind: str, workspace: str) -> str | None:
    return workspace if active_items > 0 and kind != "human" else None


#: A session's workspace while it is not human and works on an item: the stale workers of a
#: queue command are a range of ``ix_sessions_stale_workers`` (then by ``last_seen_us``).
WORKER = LiveKey(
    "ix_sessions_stale_workers",
    "sessions",
    ("active_items", "kind", "workspace"),
    _worker,
    _worker_twin,
)


def claim_prefix_in_order(at: FromClause) -> ColumnElement[str]:
    """``CLAIM_PREFIX`` under the C collation (code point order, as the probes' bounds are
    built): what ``ix_file_claims_live_key`` holds and claim_files' probes compare."""
    return Grouping(CLAIM_PREFIX.of(at).collate("C"))


#: ``claim_prefix_in_order`` as PostgreSQL text, over ``file_claims``.
CLAIM_PREFIX_IN_ORDER = str(
    claim_prefix_in_order(table("file_claims", *(column(c) for c in CLAIM_PREFIX.columns))).compile(dialect=_PG)
)

KEYS = (CLAIM_PREFIX, CLAIM_ISSUE, WORK_LIVE, WORK_QUEUED_ISSUE, WORK_ON_ISSUE, DECLARING, WORKER)


def claim_prefix_key(workspace: str, prefix: str) -> str:
    """``CLAIM_PREFIX`` of an unreleased claim of ``prefix`` (also a probe's range bound)."""
    return _live(CLAIM_PREFIX.value(workspace=workspace, literal_prefix=prefix))


def claim_issue_key(workspace: str, issue: str) -> str:
    """``CLAIM_ISSUE`` of an issue's unreleased claims."""
    return _live(CLAIM_ISSUE.value(workspace=workspace, issue=issue))


def work_live_key(workspace: str, project: str, state: str) -> str:
    """``WORK_LIVE`` of a project's ``queued`` (ready, held by no one) or ``active`` items."""
    status = "queued" if state == "queued" else "claimed"
    return _live(WORK_LIVE.value(status=status, waiting_on=0, workspace=workspace, project=project))


def work_held_key(workspace: str, project: str, session_id: str) -> str:
    """``WORK_LIVE`` of a project's ready items on issues ``session_id`` holds."""
    row = {"status": "queued", "waiting_on": 0, "held_by": session_id, "workspace": workspace, "project": project}
    return _live(WORK_LIVE.value(**row))


def work_queued_issue_key(workspace: str, project: str, issue: str | None) -> str:
    """``WORK_QUEUED_ISSUE`` of a project's ready items on ``issue`` (None: without one)."""
    row = {"status": "queued", "waiting_on": 0, "workspace": workspace, "project": project, "issue": issue}
    return _live(WORK_QUEUED_ISSUE.value(**row))


def work_on_issue_key(workspace: str, issue: str) -> str:
    """``WORK_ON_ISSUE`` of an issue's queued items."""
    return _live(WORK_ON_ISSUE.value(status="queued", workspace=workspace, issue=issue))


def declaring_key(workspace: str, issue: str) -> str:
    """``DECLARING`` of the live sessions declaring ``issue``."""
    return _live(DECLARING.value(workspace=workspace, working_on=issue))


def _live(key: str | None) -> str:
    assert key is not None, "a live row's key"
    return key
