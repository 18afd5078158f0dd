"""The event store's own tables: the log and its hash chain, stream heads, the position counter, settings,
idempotency records, harness sessions, tokens and workspaces. Read-model tables live in
``projections/``.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

#: One MetaData for the whole schema; Alembic migrations are the source of truth for DDL.
metadata = MetaData()

# SQLite only gives 64-bit rowid semantics to INTEGER, so big integers are INTEGER there.
BigInt = BigInteger().with_variant(Integer(), "sqlite")

events = Table(
    "events",
    metadata,
    # Assigned from store_head inside the appending transaction: contiguous, commit-ordered.
    Column("position", BigInt, primary_key=True, autoincrement=False),
    Column("workspace", String(64), nullable=False),
    Column("stream", String(200), nullable=False),
    Column("version", Integer, nullable=False),
    Column("type", String(64), nullable=False),
    Column("data", Text, nullable=False),
    Column("metadata", Text, nullable=False),
    Column("recorded_us", BigInt, nullable=False),
    UniqueConstraint("workspace", "stream", "version", name="uq_events_stream_version"),
    Index("ix_events_workspace_position", "workspace", "position"),
    # The log filtered by type (docs/protocol.md#history, 0004_history): a seek, then position order. Streams
    # use uq_events_stream_version, times a search over positions (eventcoord.history.logreads).
    Index("ix_events_workspace_type_position", "workspace", "type", "position"),
)

event_hashes = Table(
    "event_hashes",
    metadata,
    # The hash chain over the log (docs/protocol.md#the-hash-chain), filled in position order
    # off the command path (eventcoord.history.chainer): a row per event, never updated.
    Column("position", BigInt, primary_key=True, autoincrement=False),
    Column("hash", String(64), nullable=False),
)

stream_heads = Table(
    "stream_heads",
    metadata,
    Column("workspace", String(64), primary_key=True),
    Column("stream", String(200), primary_key=True),
    Column("version", Integer, nullable=False),
)

store_head = Table(
    "store_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("position", BigInt, nullable=False),
)

settings = Table(
    "settings",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

idempotency = Table(
    "idempotency",
    metadata,
    Column("workspace", String(64), primary_key=True),
    Column("command_id", String(128), primary_key=True),
    Column("body_hash", String(64), nullable=False),
    Column("status", Integer, nullable=False),
    Column("answer", Text, nullable=False),
    Column("recorded_us", BigInt, nullable=False),
)

harness_sessions = Table(
    "harness_sessions",
    metadata,
    # The hook route's binding of a harness session (Claude Code, Codex) to one eventcoord
    # session (eventcoord.harness.bindings): kept like the idempotency records, not rebuilt
    # from events. ``thread`` is a digest of the harness's session id, never the id itself.
    Column("workspace", String(64), primary_key=True),
    Column("harness", String(16), primary_key=True),
    Column("thread", String(64), primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("session_id", String(128), nullable=False),
    Column("previous_session_id", String(128), nullable=True),
    # Messages and displaced holds up to this position were delivered to the harness.
    Column("delivered_position", BigInt, nullable=False),
    # The last assistant message of the session's last Stop: its end's handoff note.
    Column("last_message", Text, nullable=True),
    Column("updated_us", BigInt, nullable=False),
    # When a hook last took the turn to send the session's heartbeat (a compare-and-set).
    Column("beat_claimed_us", BigInt, nullable=True),
)

tokens = Table(
    "tokens",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("workspace", String(64), nullable=False),
    Column("role", String(16), nullable=False),
    Column("created_us", BigInt, nullable=False),
    # The token's public id (derived from its hash: auth.token_id_of) and its revocation.
    Column("token_id", String(40), nullable=True),
    Column("revoked_us", BigInt, nullable=True),
    Index("ix_tokens_token_id", "token_id", unique=True),
)

workspaces = Table(
    "workspaces",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("created_us", BigInt, nullable=False),
)

guards = Table(
    "guards",
    metadata,
    # Lock rows for guards that span many read-model rows (a project's WIP cap): a command
    # locks its guard row FOR UPDATE so the database serialises the decisions that depend on it.
    Column("workspace", String(64), primary_key=True),
    Column("key", String(200), primary_key=True),
)

relay_state = Table(
    "relay_state",
    metadata,
    # One row per relay target (stream name): the publish checkpoint and the leader lease.
    Column("name", String(128), primary_key=True),
    Column("position", BigInt, nullable=False),
    Column("holder", String(128), nullable=True),
    Column("expires_us", BigInt, nullable=True),
    Column("fencing_token", BigInt, nullable=False),
)

snapshots = Table(
    "snapshots",
    metadata,
    # The read models right after ``position`` committed (eventcoord.history.snapshots): a
    # manifest naming content-addressed chunks, so an unchanged chunk is shared, not copied.
    Column("position", BigInt, primary_key=True, autoincrement=False),
    Column("recorded_us", BigInt, nullable=False),  # recorded_at of that position
    Column("created_us", BigInt, nullable=False),
    Column("manifest", Text, nullable=False),  # JSON {table: {workspace: [chunk hash, ...]}}
    # The snapshot whose history this one extends (NULL: none), and the history rows' chunks
    # since it, JSON {table/history: {workspace: [hash, ...]}} (NULL: in the manifest, whole).
    Column("base_position", BigInt, nullable=True),
    Column("history", Text, nullable=True),
)

snapshot_chunks = Table(
    "snapshot_chunks",
    metadata,
    Column("hash", String(64), primary_key=True),
    Column("data", LargeBinary, nullable=False),  # zlib-compressed JSON list of rows
)

archives = Table(
    "archives",
    metadata,
    # A prefix of the log moved to a file (``eventcoord archive``): events below
    # ``before_position`` live there; a snapshot at ``before_position - 1`` replaces them.
    Column("before_position", BigInt, primary_key=True, autoincrement=False),
    Column("file", Text, nullable=False),
    Column("events", BigInt, nullable=False),
    Column("archived_us", BigInt, nullable=False),
)

#: Tables that are the store itself, never rebuilt from events.
STORE_TABLES = (
    guards,
    events,
    event_hashes,
    stream_heads,
    store_head,
    settings,
    idempotency,
    harness_sessions,
    tokens,
    workspaces,
    relay_state,
    snapshots,
    snapshot_chunks,
    archives,
)
