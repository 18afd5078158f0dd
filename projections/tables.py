"""Every read-model table, in one place so the migration chain and the rebuild see them all.

Each projection module (``sessions``, ``leases``, ...) owns the tables named here for it and
keeps them current with ``apply``. Row identities derive from event positions, never from
database sequences, so a rebuild from position 0 reproduces the live tables exactly.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Column, Index, Integer, String, Table, Text, text

from eventcoord.store.schema import BigInt, metadata

from . import keys

#: Marks a column that holds an event position. Inside a PostgreSQL group commit such a
#: column first gets a provisional number that the batch moves to the real position just
#: before it commits (``eventcoord.store.postgres.writer``), so every one must be marked.
POSITION = {"position": True}

sessions = Table(
    "sessions",
    metadata,
    Column("session_id", String(128), primary_key=True),
    Column("workspace", String(64), nullable=False),
    Column("actor_key", String(200), nullable=False),
    Column("identity_source", String(100), nullable=False),
    Column("stable", Boolean, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("host", String(64), nullable=True),
    Column("runtime", String(64), nullable=True),
    Column("registered_us", BigInt, nullable=False),
    # Liveness is computed at read time from this, never stored as a flag (docs/protocol.md#concepts).
    Column("last_seen_us", BigInt, nullable=False),
    Column("ended_us", BigInt, nullable=True),
    Column("working_on", String(128), nullable=True),
    Column("heartbeats", BigInt, nullable=False),
    # The token that registered the session (docs/protocol.md#roles: sessions are bound to it).
    Column("token_id", String(40), nullable=True),
    # The session's claimed and running work items, kept from the queue's events: the stale
    # workers a queue command recovers are found among the sessions that work on something
    # (ix_sessions_stale_workers, 0018_stale_workers), not by walking the items in work.
    Column("active_items", Integer, nullable=False, server_default="0"),
    Index("ix_sessions_workspace_seen", "workspace", "last_seen_us"),
    # (workspace, working_on) equality plus the liveness range: the declarers query never
    # scans every live session of the workspace.
    Index("ix_sessions_working_on", "workspace", "working_on", "last_seen_us"),
    # GET /v1/agents lists the newest first: a walk, not a sort of every session ever
    # registered (0010_agents_order).
    Index("ix_sessions_registered", "workspace", "registered_us", "session_id"),
)


def _live_key_index(key: keys.LiveKey, on: Table, *then: Any) -> Index:
    """PostgreSQL's index on ``key`` (then ``then``), partial: key not null, which any
    comparison of the key implies. Each is the only index its statements can use."""
    expression = key.of(on)
    return Index(key.index, expression, *then, postgresql_where=expression.isnot(None)).ddl_if(dialect="postgresql")


# An issue's live declarers (claim_issue): the only index that reads them, holding only
# the sessions that declare (0013_declaring_key).
_live_key_index(keys.DECLARING, sessions, sessions.c.last_seen_us)


def working(of: str = "") -> str:
    """The predicate of ``ix_sessions_stale_workers``: a non-human session that works on an
    item (``of``: the table's name or alias the columns are qualified with). Its readers
    state it as the index does, so that the planners may use the partial index."""
    at = sessions if not of else sessions.alias(of)
    return str(keys.working(at.c).compile(compile_kwargs={"include_table": bool(of)}))


#: The non-human sessions that work on an item, by last sign of life: the stale ones are a
#: range of it (handlers/queue.py's suspects). SQLite's statements name it; PostgreSQL's
#: (0018) is on ``keys.WORKER`` and ``last_seen_us``, partial likewise.
WORKING = working()
Index(
    "ix_sessions_stale_workers",
    sessions.c.workspace,
    sessions.c.last_seen_us,
    sqlite_where=text(WORKING),
).ddl_if(dialect="sqlite")
Index(
    keys.WORKER.index,
    keys.WORKER.of(sessions),
    sessions.c.last_seen_us,
    postgresql_where=keys.working(sessions.c),
).ddl_if(dialect="postgresql")

#: The items in work (claimed or running), each with its worker: the sessions projection
#: keeps it from the queue's events, so that a finish, whose event names who finished the
#: item (an admin may finish another's), takes one from its worker's ``active_items``
#: without reading the queue's tables (0018_stale_workers). Only items in work have a row.
session_work = Table(
    "session_work",
    metadata,
    Column("item_id", String(128), primary_key=True),
    Column("workspace", String(64), nullable=False),
    Column("session_id", String(128), nullable=False),
)

projects = Table(
    "projects",
    metadata,
    Column("workspace", String(64), primary_key=True),
    Column("project", String(128), primary_key=True),
    Column("wip_limit", Integer, nullable=False),
    Column("lock_delay_seconds", Integer, nullable=False, server_default="0"),
    Column("agent_wip_limit", Integer, nullable=True),
)

#: Unreleased leases per project, kept by the lease appliers in the grant's or release's own
#: transaction (0004_perf): the WIP cap reads this one row instead of counting the project's
#: unreleased leases, and counts live ones only when this many could reach the limit.
project_leases = Table(
    "project_leases",
    metadata,
    Column("workspace", String(64), primary_key=True),
    Column("project", String(128), primary_key=True),
    Column("unreleased", Integer, nullable=False),
)

issues = Table(
    "issues",
    metadata,
    Column("workspace", String(64), primary_key=True),
    Column("issue", String(128), primary_key=True),
    Column("project", String(128), nullable=False),
    Column("last_fencing_token", BigInt, nullable=False),
    # The latest handoff note since the previous grant (docs/protocol.md#claim_issue-in-order).
    Column("handoff_note", Text, nullable=True),
    Column("handoff_session_id", String(128), nullable=True),
    # The last involuntary end of a lease (expired: when its holder went stale; superseded:
    # when forced), and whose lease it was: the lock delay counts from it (docs/protocol.md#lock-delay).
    Column("delay_from_us", BigInt, nullable=True),
    Column("delay_session_id", String(128), nullable=True),
)

leases = Table(
    "leases",
    metadata,
    Column("lease_id", BigInt, primary_key=True, autoincrement=False, info=POSITION),  # granting position
    Column("workspace", String(64), nullable=False),
    Column("issue", String(128), nullable=False),
    Column("project", String(128), nullable=False),
    Column("session_id", String(128), nullable=False),
    Column("actor_key", String(200), nullable=False),
    Column("fencing_token", BigInt, nullable=False),
    Column("granted_us", BigInt, nullable=False),
    Column("released_us", BigInt, nullable=True),
    Column("release_reason", String(32), nullable=True),
    # At most one unreleased lease per (workspace, issue): the database's own backstop.
    Index(
        "uq_leases_unreleased",
        "workspace",
        "issue",
        unique=True,
        sqlite_where=text("released_us IS NULL"),
        postgresql_where=text("released_us IS NULL"),
    ),
    # Each says its key is not null (always true): only a statement that names the project,
    # or the session, implies the predicate, so a lookup by issue has uq_leases_unreleased
    # alone to use, with or without statistics (0011_one_index_each).
    Index(
        "ix_leases_project_live",
        "workspace",
        "project",
        sqlite_where=text("released_us IS NULL AND project IS NOT NULL"),
        postgresql_where=text("released_us IS NULL AND project IS NOT NULL"),
    ),
    Index(
        "ix_leases_session_live",
        "session_id",
        sqlite_where=text("released_us IS NULL AND session_id IS NOT NULL"),
        postgresql_where=text("released_us IS NULL AND session_id IS NOT NULL"),
    ),
)

file_claims = Table(
    "file_claims",
    metadata,
    Column("position", BigInt, primary_key=True, autoincrement=False, info=POSITION),  # FilesClaimed position
    Column("idx", Integer, primary_key=True, autoincrement=False),  # index in its paths
    Column("workspace", String(64), nullable=False),
    Column("issue", String(128), nullable=False),
    Column("session_id", String(128), nullable=True),
    Column("actor_key", String(200), nullable=False),
    Column("path", String(1024), nullable=False),
    Column("literal_prefix", String(1024), nullable=False),
    Column("exclusive", Boolean, nullable=False),
    Column("claimed_us", BigInt, nullable=False),
    Column("released_us", BigInt, nullable=True),
    Column("release_reason", String(32), nullable=True),
    Index(
        "ix_file_claims_live",
        "workspace",
        "literal_prefix",
        sqlite_where=text("released_us IS NULL"),
        postgresql_where=text("released_us IS NULL"),
    ),
    Index("ix_file_claims_workspace_time", "workspace", "claimed_us"),
    Index("ix_file_claims_issue", "workspace", "issue"),
    # An issue's unreleased claims (release_files and its read model; 0004_perf): an issue
    # claimed and released a thousand times is still read in one short probe.
    Index(
        "ix_file_claims_issue_live",
        "workspace",
        "issue",
        sqlite_where=text("released_us IS NULL"),
        postgresql_where=text("released_us IS NULL"),
    ),
    # Live claims in position order (the dashboard's pages): walk, don't sort (0002_dashboard).
    Index(
        "ix_file_claims_live_order",
        "workspace",
        "position",
        "idx",
        sqlite_where=text("released_us IS NULL"),
        postgresql_where=text("released_us IS NULL"),
    ),
)

# claim_files' overlap probes: ranges of the live prefix key in code point order (the C
# collation), so that a range of prefixes is a range of the index (0011_one_index_each).
Index(
    keys.CLAIM_PREFIX.index,
    keys.claim_prefix_in_order(file_claims),
    postgresql_where=keys.CLAIM_PREFIX.of(file_claims).isnot(None),
).ddl_if(dialect="postgresql")
# An issue's unreleased claims (release_files and its read model).
_live_key_index(keys.CLAIM_ISSUE, file_claims)

conflicts = Table(
    "conflicts",
    metadata,
    Column("position", BigInt, primary_key=True, autoincrement=False, info=POSITION),
    Column("workspace", String(64), nullable=False),
    Column("path", String(1024), nullable=False),
    Column("issue", String(128), nullable=False),
    Column("session_id", String(128), nullable=True),
    Column("holder_path", String(1024), nullable=False),
    Column("holder_issue", String(128), nullable=False),
    Column("holder_session_id", String(128), nullable=True),
    Column("forced", Boolean, nullable=False),
    Column("occurred_us", BigInt, nullable=False),
    Column("actor_key", String(200), nullable=True),
    Column("holder_actor_key", String(200), nullable=True),
    Index("ix_conflicts_workspace_time", "workspace", "occurred_us"),
    Index("ix_conflicts_workspace_path", "workspace", "path"),
)

messages = Table(
    "messages",
    metadata,
    Column("position", BigInt, primary_key=True, autoincrement=False, info=POSITION),
    Column("workspace", String(64), nullable=False),
    Column("channel", String(200), nullable=False),
    Column("body", Text, nullable=False),
    Column("session_id", String(128), nullable=True),
    Column("actor_key", String(200), nullable=True),
    Column("recorded_us", BigInt, nullable=False),
    Index("ix_messages_channel", "workspace", "channel", "position"),
)

work_items = Table(
    "work_items",
    metadata,
    Column("item_id", String(128), primary_key=True),
    Column("workspace", String(64), nullable=False),
    Column("project", String(128), nullable=False),
    Column("issue", String(128), nullable=True),
    Column("priority", Integer, nullable=False),
    Column("payload", Text, nullable=True),
    Column("blocked_by", Text, nullable=False),  # JSON list of item ids
    Column("paths", Text, nullable=False),  # JSON list of normalised paths
    Column("status", String(16), nullable=False),
    Column("session_id", String(128), nullable=True),
    Column("actor_key", String(200), nullable=True),
    Column("host", String(64), nullable=True),
    Column("fencing_token", BigInt, nullable=True),
    Column("enqueued_position", BigInt, nullable=False, info=POSITION),
    Column("enqueued_us", BigInt, nullable=False),
    Column("updated_us", BigInt, nullable=False),
    Column("outcome", String(16), nullable=True),
    Column("attempts", Integer, nullable=False),
    # How many of its blockers have not finished ``done`` (a blocker's ``done`` is final):
    # an item is ready to pull at 0. The pull reads ready items only, so a queue whose
    # first items wait on others costs it nothing (0016_queue_ready); ``work_blockers``
    # finds whom a finished item unblocks.
    Column("waiting_on", Integer, nullable=False, server_default="0"),
    # Who holds a queued item's issue: the session of its unreleased lease (NULL: none, no
    # issue, or the item is not queued). The pull's indexes leave the items others hold out,
    # so a queue whose first items are on issues others hold costs a pull nothing
    # (0017_queue_held). The queue projection keeps it: a lease's grant sets it on the
    # issue's queued items and a release clears it; an item enqueued or re-queued reads it
    # from the lease, one claimed or finished drops it.
    Column("held_by", String(128), nullable=True),
    # GET /v1/queue pages in enqueue order, all items or one status's: walks, not sorts of
    # every item the workspace ever had (0009_queue_order).
    Index("ix_work_items_order", "workspace", "enqueued_position"),
    Index("ix_work_items_status_order", "workspace", "status", "enqueued_position"),
    Index("ix_work_items_session", "session_id", "status"),
    # The PostgreSQL group commit renumbers provisional positions by a range of this column.
    Index("ix_work_items_enqueued", "enqueued_position"),
)
# A pull reads a project's queued items in pull order, highest priority first, then in
# enqueue order: a walk of this index. With the priority ascending here SQLite sorted every
# queued item of the project on each pull (0014_queue_pull_order).
Index(
    "ix_work_items_queue",
    work_items.c.workspace,
    work_items.c.project,
    work_items.c.status,
    work_items.c.priority.desc(),
    work_items.c.enqueued_position,
)
#: The queued items a pull may take (nothing to wait for), partial: SQLite reads a project's
#: ready items no one holds through it in pull order (named by the statements), so items
#: waiting on others, or on issues others hold, are never read (0016_queue_ready,
#: 0017_queue_held) ...
READY = "status = 'queued' AND waiting_on = 0"
Index(
    "ix_work_items_ready",
    work_items.c.workspace,
    work_items.c.project,
    work_items.c.priority.desc(),
    work_items.c.enqueued_position,
    sqlite_where=text(f"{READY} AND held_by IS NULL"),
).ddl_if(dialect="sqlite")
#: ... and the ready items a session holds the issue of through this one (the puller's own).
Index(
    "ix_work_items_held",
    work_items.c.workspace,
    work_items.c.project,
    work_items.c.held_by,
    work_items.c.priority.desc(),
    work_items.c.enqueued_position,
    sqlite_where=text(f"{READY} AND held_by IS NOT NULL"),
).ddl_if(dialect="sqlite")
#: An issue's queued items, which its lease's grant and release mark held and free (SQLite;
#: PostgreSQL has an index of the same name on ``keys.WORK_ON_ISSUE``: 0017_queue_held).
QUEUED_ON_ISSUE = "status = 'queued' AND issue IS NOT NULL"
Index(
    "ix_work_items_queued_on_issue",
    work_items.c.workspace,
    work_items.c.issue,
    sqlite_where=text(QUEUED_ON_ISSUE),
).ddl_if(dialect="sqlite")
_live_key_index(keys.WORK_ON_ISSUE, work_items)
# A pull from a project at its cap reads only its ready items without an issue (in pull
# order) and those on the issues it may still take: SQLite through this index (named by the
# statements), PostgreSQL through the one on ``keys.WORK_QUEUED_ISSUE``, in pull order
# (0015_queue_at_cap, ready items only since 0016_queue_ready).
Index(
    "ix_work_items_queued_issue",
    work_items.c.workspace,
    work_items.c.project,
    work_items.c.issue,
    work_items.c.priority.desc(),
    work_items.c.enqueued_position,
    sqlite_where=text(READY),
).ddl_if(dialect="sqlite")
_live_key_index(keys.WORK_QUEUED_ISSUE, work_items, work_items.c.priority.desc(), work_items.c.enqueued_position)
# The queue's reads of a project's live items (the stale workers' items, the pages of ready
# items no one holds and of the puller's own), in pull order: no finished item and no item
# waiting on others (0012_queue_live_key, 0016_queue_ready, 0017_queue_held).
_live_key_index(keys.WORK_LIVE, work_items, work_items.c.priority.desc(), work_items.c.enqueued_position)

work_blockers = Table(
    "work_blockers",
    metadata,
    # One row per (blocker, item it blocks), written when the item is enqueued for each of
    # its blockers not finished then: when a blocker finishes ``done``, the items it blocks
    # are found here and their ``waiting_on`` counted down. A blocker's rows go when it
    # finishes, whatever the outcome: the table holds the unfinished blockers' only.
    Column("workspace", String(64), primary_key=True),
    Column("blocker_id", String(128), primary_key=True),
    Column("item_id", String(128), primary_key=True),
)

work_ledger = Table(
    "work_ledger",
    metadata,
    # The audit ledger: which session, actor and host moved which item, when.
    Column("position", BigInt, primary_key=True, autoincrement=False, info=POSITION),
    Column("workspace", String(64), nullable=False),
    Column("item_id", String(128), nullable=False),
    Column("action", String(32), nullable=False),
    Column("session_id", String(128), nullable=True),
    Column("actor_key", String(200), nullable=True),
    Column("host", String(64), nullable=True),
    Column("detail", String(240), nullable=True),
    Column("recorded_us", BigInt, nullable=False),
    Index("ix_work_ledger_item", "workspace", "item_id", "position"),
    Index("ix_work_ledger_session", "session_id", "position"),
)

named_leases = Table(
    "named_leases",
    metadata,
    Column("workspace", String(64), primary_key=True),
    Column("name", String(128), primary_key=True),
    Column("session_id", String(128), nullable=True),
    Column("actor_key", String(200), nullable=True),
    Column("fencing_token", BigInt, nullable=False),
    Column("ttl_seconds", Integer, nullable=False),
    Column("expires_us", BigInt, nullable=True),
    Column("acquired_us", BigInt, nullable=True),
    Column("capacity", Integer, nullable=False, server_default="1"),  # fixed by the first acquire
)

named_lease_slots = Table(
    "named_lease_slots",
    metadata,
    # The current holders of each named lease: one row per held slot (docs/protocol.md#capacity).
    Column("workspace", String(64), primary_key=True),
    Column("name", String(128), primary_key=True),
    Column("session_id", String(128), primary_key=True),
    Column("actor_key", String(200), nullable=True),
    Column("fencing_token", BigInt, nullable=False),
    Column("ttl_seconds", Integer, nullable=False),
    Column("expires_us", BigInt, nullable=False),
    Column("acquired_us", BigInt, nullable=False),
    Index("ix_named_lease_slots_session", "session_id"),
)

waits = Table(
    "waits",
    metadata,
    # One row per waiter (a files wait: one per requested path); the place in a line is the
    # rank by the WaitStarted position, so rows of one line are read in position order.
    Column("position", BigInt, primary_key=True, autoincrement=False, info=POSITION),
    Column("idx", Integer, primary_key=True, autoincrement=False),
    Column("workspace", String(64), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("key", String(1024), nullable=False),
    Column("session_id", String(128), nullable=False),
    Column("actor_key", String(200), nullable=False),
    Column("project", String(128), nullable=True),
    Column("issue", String(128), nullable=True),
    Column("paths", Text, nullable=False),  # JSON list: the whole files wait
    Column("exclusive", Boolean, nullable=False),
    Column("ttl_seconds", Integer, nullable=True),
    Column("capacity", Integer, nullable=True),
    Column("since_us", BigInt, nullable=False),
    Index("ix_waits_line", "workspace", "kind", "key", "position"),
    Index("ix_waits_session", "session_id"),
)

#: Indexes that only reads and decisions use: no applier finds a row through them. A
#: rebuild on SQLite drops them while it replays and builds them again at the end (sorting
#: once costs less than keeping them up to date through a million events).
REPLAY_FREE_INDEXES = frozenset(
    {
        "ix_sessions_workspace_seen",
        "ix_sessions_working_on",
        "ix_sessions_registered",
        "ix_leases_project_live",
        "ix_leases_session_live",
        "ix_file_claims_live",
        "ix_file_claims_workspace_time",
        "ix_file_claims_issue",
        "ix_file_claims_live_order",
        "ix_conflicts_workspace_time",
        "ix_conflicts_workspace_path",
        "ix_messages_channel",
        "ix_work_items_queue",
        "ix_work_items_session",
        "ix_work_items_enqueued",
        "ix_work_items_order",
        "ix_work_items_status_order",
        "ix_work_ledger_item",
        "ix_work_ledger_session",
    }
)

#: Tables a rebuild empties and refills from the log, in dependency-free order.
READ_MODEL_TABLES = (
    sessions,
    session_work,
    projects,
    issues,
    leases,
    project_leases,
    file_claims,
    conflicts,
    messages,
    work_items,
    work_blockers,
    work_ledger,
    named_leases,
    named_lease_slots,
    waits,
)
