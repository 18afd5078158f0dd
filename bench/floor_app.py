"""The floor: the no-op stack plus a claim's own SQLite statements, and nothing else.

What any implementation of ``claim_issue`` on this HTTP stack and this schema must at
least pay. The no-op stack (``bench/noop_app.py``: the same Litestar settings, the same
uvicorn options) gets ``POST /v1/commands`` as an ASGI route, as ``eventcoord serve`` has
it, whose handler:

1. reads the body and decodes the claim with msgspec into a three-field struct;
2. hands it to a writer on the event loop that gathers the claims waiting at that moment
   into one transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``, as the store's writer does);
3. runs for each claim the statements the store runs for it, copied from a trace of
   ``eventcoord serve`` (one read of the caller's session and the issue's lease, registry,
   project and cap; the stream head; the event; the issue; the lease; the project's count;
   the queue's hold marks; the caller's waits; the caller's last sign of life) and, per
   batch, the log's head and the streams' heads;
4. answers a real-sized grant, encoded with msgspec.

No auth, no command model, no decision, no event objects, no projections' Python, no
metrics: what is left when every line of Python that is not a statement or the HTTP stack
is gone. ``bench/floor.py`` runs it beside the no-op stack and ``eventcoord serve``.

    .venv/bin/python bench/floor_app.py --sqlite /path/to/eventcoord.db --port 18702
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import time
from typing import Any

import msgspec
import uvicorn
from litestar import Litestar, MediaType, asgi, get
from litestar.openapi import OpenAPIConfig
from litestar.response import Response

from eventcoord.api.body import MAX_BODY, read_body
from eventcoord.api.errors import EXCEPTION_HANDLERS
from eventcoord.store.postgres.writer import end_statement


class Claim(msgspec.Struct):
    """What the floor reads of a claim_issue command."""

    session_id: str
    project: str
    issue: str


_DECODE = msgspec.json.Decoder(Claim).decode
_ENCODE = msgspec.json.Encoder().encode
_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json")],
}

#: One claim's statements, as ``eventcoord serve`` runs them on SQLite (a trace of one claim).
_READ = """WITH lease AS (SELECT leases.issue AS issue, leases.project AS project, leases.session_id AS session_id,
  leases.actor_key AS actor_key, leases.fencing_token AS fencing_token FROM leases
  WHERE leases.workspace = ?1 AND leases.issue = ?2 AND leases.released_us IS NULL)
SELECT projects.wip_limit, projects.lock_delay_seconds, projects.agent_wip_limit, project_leases.unreleased,
  issues.issue, issues.project, issues.last_fencing_token, issues.handoff_note, issues.handoff_session_id,
  issues.delay_from_us, issues.delay_session_id,
  EXISTS (SELECT * FROM waits WHERE waits.workspace = ?1 AND waits.kind = 'issue' AND waits."key" = ?2) AS w,
  EXISTS (SELECT * FROM sessions WHERE sessions.workspace = ?1 AND sessions.working_on = ?2
    AND sessions.ended_us IS NULL AND sessions.last_seen_us > ?5) AS d,
  lease.issue AS issue_1, lease.project AS project_1, lease.session_id, lease.actor_key, lease.fencing_token,
  caller.session_id AS session_id_1, caller.actor_key AS actor_key_1, caller.kind, caller.stable,
  caller.identity_source, caller.host, caller.last_seen_us, caller.ended_us, caller.working_on, caller.token_id
FROM (SELECT 1 AS one) AS one
  LEFT OUTER JOIN projects ON projects.workspace = ?1 AND projects.project = ?3
  LEFT OUTER JOIN project_leases ON project_leases.workspace = ?1 AND project_leases.project = ?3
  LEFT OUTER JOIN issues ON issues.workspace = ?1 AND issues.issue = ?2
  LEFT OUTER JOIN lease ON 1 = 1
  LEFT OUTER JOIN sessions AS caller ON caller.session_id = ?4 AND (caller.workspace || '') = ?1"""
#: Where the read's columns are.
_AT_TOKEN, _AT_ACTOR = 6, 19
_HEAD = "SELECT version FROM stream_heads WHERE workspace = ? AND stream = ?"
_EVENT = (
    "INSERT INTO events (position, workspace, stream, version, type, data, metadata, recorded_us) "
    "VALUES (?, ?, ?, ?, 'LeaseGranted', ?, ?, ?)"
)
_ISSUE = (
    "INSERT INTO issues (workspace, issue, project, last_fencing_token) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (workspace, issue) DO UPDATE SET last_fencing_token = excluded.last_fencing_token, "
    "handoff_note = NULL, handoff_session_id = NULL"
)
_LEASE = (
    "INSERT INTO leases (lease_id, workspace, issue, project, session_id, actor_key, fencing_token, granted_us) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_COUNT = (
    "INSERT INTO project_leases (workspace, project, unreleased) VALUES (?, ?, 1) "
    "ON CONFLICT (workspace, project) DO UPDATE SET unreleased = project_leases.unreleased + 1"
)
_HOLD = (
    "UPDATE work_items INDEXED BY ix_work_items_queued_on_issue SET held_by = ? "
    "WHERE workspace = ? AND issue = ? AND status = 'queued' AND issue IS NOT NULL"
)
_WAITS = "DELETE FROM waits WHERE session_id = ? AND workspace = ? AND kind = 'issue' AND \"key\" = ?"
_SEEN = "UPDATE sessions SET last_seen_us = ? WHERE session_id = ? AND ended_us IS NULL AND last_seen_us < ?"
_LOG_HEAD = "UPDATE store_head SET position = ? WHERE id = 1"
_STREAM_HEADS = (
    "INSERT INTO stream_heads (workspace, stream, version) VALUES (?, ?, ?) "
    "ON CONFLICT (workspace, stream) DO UPDATE SET version = excluded.version"
)
WS = "default"


def _grant(issue: str, project: str, token: int, position: int) -> bytes:
    """A real-sized grant (the answer ``eventcoord serve`` sends)."""
    result = {"issue": issue, "project": project, "fencing_token": token, "handoff_note": None}
    return _ENCODE(
        {"ok": True, "result": result, "events": [{"position": position, "type": "LeaseGranted"}], "position": position}
    )


class SqliteWriter:
    """Gathers the claims waiting at one turn of the loop into one SQLite transaction."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # The store's writer's settings: checkpoints off the loop, 64 MiB of page cache.
        pragmas = ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=5000", "wal_autocheckpoint=0")
        for pragma in (*pragmas, "cache_size=-65536"):
            self.db.execute(f"PRAGMA {pragma}")
        self.path = path
        #: A checkpoint is finishing the log: batches wait for it, as the store's do.
        self.held = False
        self.position: int = self.db.execute("SELECT position FROM store_head WHERE id = 1").fetchone()[0]
        self.pending: list[tuple[Claim, asyncio.Future[bytes]]] = []

    def submit(self, claim: Claim) -> asyncio.Future[bytes]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        if not self.pending and not self.held:
            loop.call_soon(self.flush)
        self.pending.append((claim, future))
        return future

    def _checkpoint(self) -> int:
        conn = sqlite3.connect(self.path, timeout=10)
        try:
            return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
        finally:
            conn.close()

    async def checkpoints(self) -> None:
        """The store's policy, simplified: copy the WAL off the loop every 0.25 s; past
        4,096 frames, hold the writer for one more copy so that the log starts over."""
        while True:
            await asyncio.sleep(0.25)
            if await asyncio.to_thread(self._checkpoint) < 4096:
                continue
            self.held = True
            try:
                await asyncio.to_thread(self._checkpoint)
            finally:
                self.held = False
                if self.pending:
                    asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        if self.held or not self.pending:
            return
        batch, self.pending = self.pending, []
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        heads = []
        answers = []
        now = int(time.time() * 1e6)
        for claim, _ in batch:
            sid, project, issue = claim.session_id, claim.project, claim.issue
            stream = "issue:" + issue
            row = db.execute(_READ, (WS, issue, project, sid, now - 120_000_000)).fetchone()
            current = db.execute(_HEAD, (WS, stream)).fetchone()
            version = (current[0] if current else 0) + 1
            token = (row[_AT_TOKEN] or 0) + 1
            self.position += 1
            data = _ENCODE(
                {
                    "project": project,
                    "issue": issue,
                    "session_id": sid,
                    "actor_key": row[_AT_ACTOR],
                    "fencing_token": token,
                }
            )
            meta = _ENCODE({"workspace": WS, "actor_key": row[_AT_ACTOR], "session_id": sid})
            db.execute(_EVENT, (self.position, WS, stream, version, data, meta, now))
            db.execute(_ISSUE, (WS, issue, project, token))
            db.execute(_LEASE, (self.position, WS, issue, project, sid, row[_AT_ACTOR], token, now))
            db.execute(_COUNT, (WS, project))
            db.execute(_HOLD, (sid, WS, issue))
            db.execute(_WAITS, (sid, WS, issue))
            db.execute(_SEEN, (now, sid, now))
            heads.append((WS, stream, version))
            answers.append(_grant(issue, project, token, self.position))
        db.execute(_LOG_HEAD, (self.position,))
        db.executemany(_STREAM_HEADS, heads)
        db.execute("COMMIT")
        for (_, future), answer in zip(batch, answers, strict=True):
            future.set_result(answer)


#: PostgreSQL: a batch's statements, as ``eventcoord serve`` runs them for a batch of claims
#: (a trace of one batch): the projects' guards locked, then what the claims read, their
#: writes (lease ids as placeholders), and the append, which renumbers the placeholders.
_PG_GUARDS = (
    "INSERT INTO guards (workspace, key) SELECT $1, k FROM unnest($2::varchar[]) AS k ORDER BY k "
    "ON CONFLICT (workspace, key) DO UPDATE SET key = excluded.key WHERE false"
)
#: Each claim's rows by index, one lateral lookup each (as the store's per-claim reads are;
#: OFFSET 0 keeps the planner from flattening them into scans of the workspace).
_PG_READS = """WITH c AS (SELECT * FROM unnest($2::varchar[], $3::varchar[], $4::varchar[])
  WITH ORDINALITY AS c(issue, project, sid, n))
SELECT c.n, p.wip_limit, p.lock_delay_seconds, p.agent_wip_limit, pl.unreleased, i.last_fencing_token,
  i.handoff_note, l.session_id, l.fencing_token, s.actor_key, s.kind, s.ended_us, s.token_id,
  EXISTS (SELECT * FROM waits WHERE waits.workspace = $1 AND waits.kind = 'issue' AND waits.key = c.issue) AS w,
  EXISTS (SELECT * FROM sessions WHERE (CASE WHEN sessions.ended_us IS NULL
    THEN sessions.workspace || E'\\x01' || sessions.working_on END) = $1 || E'\\x01' || c.issue
    AND sessions.last_seen_us > $5) AS d
FROM c
  LEFT JOIN LATERAL (SELECT * FROM projects WHERE workspace = $1 AND project = c.project OFFSET 0) AS p ON true
  LEFT JOIN LATERAL (SELECT * FROM project_leases WHERE workspace = $1 AND project = c.project OFFSET 0) AS pl ON true
  LEFT JOIN LATERAL (SELECT * FROM issues WHERE workspace = $1 AND issue = c.issue OFFSET 0) AS i ON true
  LEFT JOIN LATERAL (SELECT * FROM leases WHERE workspace = $1 AND issue = c.issue AND released_us IS NULL
    OFFSET 0) AS l ON true
  LEFT JOIN LATERAL (SELECT * FROM sessions WHERE session_id = c.sid AND workspace = $1 OFFSET 0) AS s ON true
ORDER BY c.n"""
_PG_WRITES = """WITH u AS (SELECT * FROM unnest($2::varchar[], $3::varchar[], $4::varchar[], $5::varchar[],
  $6::bigint[], $7::bigint[]) AS u(issue, project, sid, actor, token, lease_id)),
a AS (INSERT INTO issues (workspace, issue, project, last_fencing_token) SELECT $1, issue, project, token FROM u
  ON CONFLICT (workspace, issue) DO UPDATE SET last_fencing_token = excluded.last_fencing_token, handoff_note = NULL,
  handoff_session_id = NULL),
b AS (INSERT INTO leases (lease_id, workspace, issue, project, session_id, actor_key, fencing_token, granted_us)
  SELECT lease_id, $1, issue, project, sid, actor, token, $8 FROM u),
c AS (INSERT INTO project_leases (workspace, project, unreleased) SELECT $1, project, count(*) FROM u GROUP BY project
  ORDER BY project ON CONFLICT (workspace, project) DO UPDATE
  SET unreleased = project_leases.unreleased + excluded.unreleased),
d AS (UPDATE work_items SET held_by = u.sid FROM u WHERE (CASE WHEN work_items.status = 'queued' AND work_items.issue
  IS NOT NULL THEN work_items.workspace || E'\\x01' || work_items.issue END) = $1 || E'\\x01' || u.issue),
e AS (DELETE FROM waits USING u WHERE waits.session_id = u.sid AND waits.workspace = $1 AND waits.kind = 'issue'
  AND waits.key = u.issue),
f AS (UPDATE sessions SET last_seen_us = $8 FROM (SELECT DISTINCT sid FROM u) AS x WHERE sessions.session_id = x.sid
  AND sessions.ended_us IS NULL AND sessions.last_seen_us < $8)
SELECT 1"""
#: The store's own end statement for a batch that wrote leases, waits and work items.
_PG_APPEND = end_statement(frozenset({"leases", "waits", "work_items"}))
#: Placeholder lease ids, far above any position, renumbered by the append (as the store does).
_PLACEHOLDER = 1 << 62


class PostgresWriter:
    """``writers`` connections; each takes as its batch the claims waiting when it is free."""

    def __init__(self, url: str, writers: int = 1) -> None:
        self.url = url
        self.writers = writers
        self.pending: list[tuple[Claim, asyncio.Future[bytes]]] = []
        self.arrived = asyncio.Event()

    def submit(self, claim: Claim) -> asyncio.Future[bytes]:
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.pending.append((claim, future))
        self.arrived.set()
        return future

    async def run(self) -> None:
        await asyncio.gather(*(self.run_one(i) for i in range(self.writers)))

    async def run_one(self, index: int) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        # Each writer's own placeholder lease ids: two batches in flight never insert the same key.
        placeholder = _PLACEHOLDER + (index << 40)
        while True:
            await self.arrived.wait()
            self.arrived.clear()
            batch, self.pending = self.pending[:256], self.pending[256:]
            if self.pending:
                self.arrived.set()
            try:
                answers = await self.decide(conn, [c for c, _ in batch], placeholder)
            except Exception as e:  # a floor has no retries: a failure is a bug here
                for _, future in batch:
                    future.set_exception(e)
                continue
            for (_, future), answer in zip(batch, answers, strict=True):
                future.set_result(answer)

    async def decide(self, conn: Any, claims: list[Claim], placeholder: int = _PLACEHOLDER) -> list[bytes]:
        now = int(time.time() * 1e6)
        issues = [c.issue for c in claims]
        projects = [c.project for c in claims]
        sids = [c.session_id for c in claims]
        async with conn.transaction():
            await conn.execute(_PG_GUARDS, WS, sorted({"project:" + p for p in projects}))
            rows = await conn.fetch(_PG_READS, WS, issues, projects, sids, now - 120_000_000)
            tokens = [(r["last_fencing_token"] or 0) + 1 for r in rows]
            actors = [r["actor_key"] for r in rows]
            lease_ids = [placeholder + i for i in range(len(claims))]
            await conn.execute(_PG_WRITES, WS, issues, projects, sids, actors, tokens, lease_ids, now)
            data = [
                _ENCODE(
                    {
                        "project": c.project,
                        "issue": c.issue,
                        "session_id": c.session_id,
                        "actor_key": a,
                        "fencing_token": t,
                    }
                ).decode()
                for c, a, t in zip(claims, actors, tokens, strict=True)
            ]
            meta = [
                _ENCODE({"workspace": WS, "actor_key": a, "session_id": c.session_id}).decode()
                for c, a in zip(claims, actors, strict=True)
            ]
            n = len(claims)
            base, _versions, _clock, _ttl = await conn.fetchrow(
                _PG_APPEND,
                n,
                [WS] * n,
                ["issue:" + i for i in issues],
                [None] * n,
                ["LeaseGranted"] * n,
                data,
                meta,
                [now] * n,
                placeholder,
                placeholder + n,
                "0",
            )
        return [
            _grant(c.issue, c.project, t, base + k + 1) for k, (c, t) in enumerate(zip(claims, tokens, strict=True))
        ]


def create_floor_app(path: str | None, pg_url: str | None = None, writers: int = 1) -> Litestar:
    """The no-op stack's app with the floor's command route (SQLite at ``path``, or PostgreSQL)."""
    writer: dict[str, Any] = {}

    @asgi("/v1/commands", copy_scope=False)
    async def floor_command(scope: Any, receive: Any, send: Any) -> None:
        length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        claim = _DECODE(await read_body(receive, length))
        answer = await writer["w"].submit(claim)
        await send({**_START, "headers": [*_START["headers"], (b"content-length", str(len(answer)).encode())]})
        await send({"type": "http.response.body", "body": answer, "more_body": False})

    @get("/health", media_type=MediaType.JSON)
    async def health() -> Response[bytes]:
        return Response(b'{"status":"ok"}', media_type=MediaType.JSON)

    tasks: list[asyncio.Task[None]] = []

    def start() -> None:
        loop = asyncio.get_running_loop()
        if pg_url is not None:
            writer["w"] = PostgresWriter(pg_url, writers)
            tasks.append(loop.create_task(writer["w"].run()))
        else:
            assert path is not None
            writer["w"] = SqliteWriter(path)
            tasks.append(loop.create_task(writer["w"].checkpoints()))

    return Litestar(
        route_handlers=[floor_command, health],
        on_startup=[start],
        exception_handlers=EXCEPTION_HANDLERS,
        request_max_body_size=MAX_BODY,
        openapi_config=OpenAPIConfig(title="eventcoord-floor", version="0.1.0", path="/schema"),
        debug=False,
    )


def main() -> None:
    """Serve the floor until interrupted."""
    from noop_app import uvicorn_options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--sqlite", help="the SQLite file of a migrated store")
    where.add_argument("--pg", help="postgresql://… of a migrated store")
    parser.add_argument("--writers", type=int, default=1, help="PostgreSQL: batches in flight (default 1)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18702)
    args = parser.parse_args()
    config = uvicorn.Config(
        create_floor_app(args.sqlite, args.pg, args.writers),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        **uvicorn_options(),  # type: ignore[arg-type]
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
