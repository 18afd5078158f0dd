"""The fleet workload that fills a store for ``bench/history_reads.py``: real commands, in process.

Every event is decided and appended by ``Service.execute`` (the HTTP path without HTTP), so
the log, the read models and the snapshots are exactly what a serving replica would hold.
Speed comes from concurrency, not from shortcuts: ``agents`` commands are in flight at once
and the store's group commit batches them.

Each agent runs a cycle of ``cycle`` steps, offset from the others so every wave mixes them:
claim an issue of its team's project (issues come back every 16 cycles: reclaims), claim two
files, every 4th cycle try a teammate's file (a refused claim: a ``ClaimConflict``, unless the
teammate is between tasks), enqueue an item and pull and finish it, post a message, heartbeat
the other steps, release the files and the issue; every 25th cycle the agent ends its session
and registers a new one (session churn). With the default cycle of 60 steps about 87 % of the
events are heartbeats, 13 % the rest, and the read models grow by ~8 rows per cycle.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, delete

from eventcoord import projections
from eventcoord.codec import decode_command
from eventcoord.context import Caller
from eventcoord.history import logreads, snapshots
from eventcoord.history.worker import take_snapshot
from eventcoord.projections.tables import READ_MODEL_TABLES
from eventcoord.service import Service
from eventcoord.store import dbclock, log
from eventcoord.store.base import EventStore

OPERATOR = Caller("default", "admin", operator=True)
#: Agents of one team share a project and may touch each other's files.
TEAM = 8


class Fleet:
    """The agents' state between waves (session ids, the item each one pulled)."""

    def __init__(self, store: EventStore, agents: int, cycle: int) -> None:
        self.service = Service(store)
        self.store = store
        self.agents = agents
        self.cycle = cycle
        self.sids: list[str] = []
        self.items: list[str | None] = [None] * agents
        self.refused = 0

    async def send(self, body: dict[str, Any]) -> Any:
        """One command; a refusal that writes nothing (raised) counts and answers None."""
        try:
            outcome = await self.service.execute(OPERATOR, decode_command(json.dumps(body).encode()))
        except Exception:
            self.refused += 1
            return None
        return outcome.result

    async def start(self) -> None:
        """Configure one project per team and register every agent."""
        for t in range((self.agents + TEAM - 1) // TEAM):
            await self.send({"type": "configure_project", "project": f"T{t}", "wip_limit": 1000})
        for i in range(self.agents):
            got = await self.send({"type": "register_agent", "actor": f"a{i}", "host": "h1"})
            self.sids.append(got["session_id"])

    async def step(self, i: int, wave: int) -> None:
        """Agent ``i``'s command(s) of this wave."""
        n = wave - (i * 7) % self.cycle  # staggered: agent i starts its first task later
        sid, t, j = self.sids[i], i // TEAM, i % TEAM
        if n < 0:
            await self.send({"type": "heartbeat_agent", "session_id": sid})
            return
        phase, cycle = n % self.cycle, n // self.cycle
        issue = f"T{t}-{j}-{cycle % 16}"
        if phase == 0:
            if cycle % 25 == 24:  # session churn: the old session ends, a new one starts
                await self.send({"type": "end_agent", "session_id": sid})
                got = await self.send({"type": "register_agent", "actor": f"a{i}", "host": "h1"})
                sid = self.sids[i] = got["session_id"]
            await self.send({"type": "claim_issue", "session_id": sid, "project": f"T{t}", "issue": issue})
        elif phase == 1:
            paths = [f"src/t{t}/a{j}/f{cycle % 8}.py", f"src/t{t}/a{j}/common.py"]
            await self.send({"type": "claim_files", "session_id": sid, "issue": issue, "paths": paths})
        elif phase == 2 and cycle % 4 == 0:
            other = f"src/t{t}/a{(j + 1) % TEAM}/common.py"
            await self.send({"type": "claim_files", "session_id": sid, "issue": issue, "paths": [other]})
        elif phase == 3:
            body = {"type": "enqueue_work", "project": f"T{t}", "priority": cycle % 3, "payload": {"n": n}}
            await self.send(body)
        elif phase == 4:
            got = await self.send({"type": "claim_next_work", "session_id": sid, "project": f"T{t}"})
            item = (got or {}).get("item")
            self.items[i] = item["item_id"] if item else None
        elif phase == 5 and self.items[i]:
            await self.send({"type": "start_work", "session_id": sid, "item_id": self.items[i]})
        elif phase == 6:
            body = {"type": "post_message", "session_id": sid, "channel": f"project:T{t}", "body": f"{issue} ok"}
            await self.send(body)
        elif phase == 8 and self.items[i]:
            await self.send({"type": "finish_work", "session_id": sid, "item_id": self.items[i]})
            self.items[i] = None
        elif phase == self.cycle - 2:
            await self.send({"type": "release_files", "session_id": sid, "issue": issue})
        elif phase == self.cycle - 1:
            await self.send({"type": "release_issue", "session_id": sid, "issue": issue, "reason": "completed"})
        else:
            await self.send({"type": "heartbeat_agent", "session_id": sid})


async def live_snapshot(store: EventStore) -> int:
    """A snapshot of the live read models at the head, with the project's ``dump``/``write``.

    Only while nothing else writes (between two waves of the fill): then the live read models
    are the read models at the head, which is what the worker's replay in a scratch rebuilds
    (``rebuild --check`` proves live == replay). The worker's way costs a load of the previous
    snapshot and a replay besides, and replays from zero when there is none.
    """

    def take(conn: Connection) -> int:
        p = log.head(conn)
        at_us = logreads.recorded_us_of(conn, p)
        assert at_us is not None
        d = snapshots.dump(conn, tables=READ_MODEL_TABLES)  # the live store counts no paths
        snapshots.write(conn, p, at_us, dbclock.read(conn)[0], d.manifest, d.chunks)
        return p

    return await store.transact(take)


async def fill(
    store: EventStore,
    events: int,
    *,
    agents: int,
    cycle: int,
    every: int,
    window: tuple[int, int] | None = None,
    end_sessions: bool = False,
    say: Callable[[str], None] = print,
) -> dict[str, float]:
    """Run the fleet until the head reaches ``events``; a snapshot every ``every`` events.

    Without ``window`` the snapshots are the background worker's own ``take_snapshot``,
    inline (the fill waits for each). With ``window = (lo, hi)`` they are taken only while
    the head is in it, from the live read models (:func:`live_snapshot`): an ``as_of``
    reads just the nearest snapshot, so the ones far from the measured moments change
    nothing but the fill's time. ``end_sessions``: at the end every agent ends its session
    (``end_agent``: its leases and claims released, as a shift that leaves; a log grown from
    it then holds one shift's live state, not every shift's). Returns the fill's timings.
    """
    fleet = Fleet(store, agents, cycle)
    await fleet.start()
    t0, wave, snap_s, snaps = time.perf_counter(), 0, 0.0, 0
    next_snap = every if window is None else window[0]
    last_say = t0
    while (head := await store.head()) < events:
        await asyncio.gather(*(fleet.step(i, wave) for i in range(agents)))
        wave += 1
        head = await store.head()
        if every and head >= next_snap and (window is None or head <= window[1]):
            s = time.perf_counter()
            await (take_snapshot(store) if window is None else live_snapshot(store))
            snap_s += time.perf_counter() - s
            snaps += 1
            next_snap = (head // every + 1) * every
        if time.perf_counter() - last_say > 60:
            last_say = time.perf_counter()
            rate = head / (last_say - t0 - snap_s)
            say(f"  fill: {head:,} events, {rate:,.0f} events/s, {snaps} snapshots ({snap_s:.0f} s)")
    if end_sessions:
        await asyncio.gather(*(fleet.send({"type": "end_agent", "session_id": sid}) for sid in fleet.sids))
        head = await store.head()
    wall = time.perf_counter() - t0
    return {"events": float(head), "wall_s": wall, "snapshot_s": snap_s, "snapshots": snaps, "refused": fleet.refused}


# --- Growing a pipeline-made log to ten million events -------------------------------------------
#
# The pipeline fills ~2,000-4,000 events/s on this shared 2-core machine: ten million take
# over an hour. ``grow`` instead appends ``copies - 1`` more shifts of the same fleet after
# a pipeline-made log: each copy is the original's rows with every identity renamed (its own
# sessions, work items, projects, issues and paths), positions and times moved past the
# previous copy. Each shift is thus as valid as the original (the same commands' events,
# under other names); a shift's agents simply stop when it ends, as a fleet that is
# replaced. The read models and snapshots are then derived by the project's own code.

_IDS = re.compile(r'(?<=["\:])([sw])-18')  # session and work item ids (time-based, 18…)
_KEYS = re.compile(r'(?<=["\:])T(?=\d)')  # projects and issues (T3, T3-1-7), also in streams
_PATHS = re.compile(r'"src/t(?=\d)')
_TIMES = re.compile(r'"(ended_at_us|expires_at_us)":(\d+)')


def _renamer(copy: int, shift_us: int) -> Callable[[str], str]:
    def rename(text: str) -> str:
        text = _IDS.sub(lambda m: f"{m[1]}-{copy:02x}", text)
        text = _KEYS.sub(f"K{copy}T", text)
        text = _PATHS.sub(f'"src/k{copy}/t', text)
        return _TIMES.sub(lambda m: f'"{m[1]}":{int(m[2]) + shift_us}', text)

    return rename


def grow(sqlite_path: str, copies: int, say: Callable[[str], None] = print) -> int:
    """Append ``copies - 1`` renamed shifts of the log in ``sqlite_path``; returns the new head.

    Only the log (``events``, ``stream_heads``, ``store_head``) is written: the read models
    must be derived afterwards (:func:`derive`). Copies are numbered 1… and never 0x18,
    so renamed ids cannot meet the original's.
    """
    assert 1 <= copies < 0x18
    db = sqlite3.connect(sqlite_path)
    n, lo, hi = db.execute("SELECT max(position), min(recorded_us), max(recorded_us) FROM events").fetchone()
    span = hi - lo + 1_000_000
    cols = "position, workspace, stream, version, type, data, metadata, recorded_us"
    for copy in range(1, copies):
        rename = _renamer(copy, span * copy)
        rows = db.execute(f"SELECT {cols} FROM events WHERE position <= ? ORDER BY position", (n,))
        out = db.cursor()
        while batch := rows.fetchmany(50_000):
            out.executemany(
                f"INSERT INTO events ({cols}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (p + n * copy, ws, rename(st), v, t, rename(d), rename(m), at + span * copy)
                    for p, ws, st, v, t, d, m, at in batch
                ],
            )
        db.commit()
        say(f"  grow: copy {copy} appended (head {n * (copy + 1):,})")
    db.execute("DELETE FROM stream_heads")
    db.execute(
        "INSERT INTO stream_heads (workspace, stream, version) "
        "SELECT workspace, stream, max(version) FROM events GROUP BY workspace, stream"
    )
    db.execute("UPDATE store_head SET position = (SELECT max(position) FROM events) WHERE id = 1")
    db.commit()
    head = int(db.execute("SELECT position FROM store_head WHERE id = 1").fetchone()[0])
    db.close()
    return head


def derive(conn: Connection, every: int, window: tuple[int, int], batch: int = 5000) -> int:
    """The read models from the whole log, with a snapshot every ``every`` events in ``window``.

    What ``projections.rebuild`` does (empty every read model, replay the log through
    ``projections.apply``), stopping at each snapshot position to store the read models
    there with the snapshot code's own ``dump`` and ``write``. Returns the snapshots taken.
    """
    for table in reversed(READ_MODEL_TABLES):
        conn.execute(delete(table))
    targets = list(range(window[0], window[1] + 1, every))
    after, taken = 0, 0
    while page := log.read_recorded(conn, after, batch):
        end = page[-1].position
        while targets and targets[0] <= end:
            cut = targets.pop(0)
            head = [r for r in page if r.position <= cut]
            projections.apply(conn, head)
            page = page[len(head) :]
            d = snapshots.dump(conn, tables=READ_MODEL_TABLES)  # the live store counts no paths
            snapshots.write(conn, cut, head[-1].recorded_us, dbclock.read(conn)[0], d.manifest, d.chunks)
            taken += 1
        projections.apply(conn, page)
        after = end
    return taken
