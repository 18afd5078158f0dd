"""Point-in-time reads (``as_of``, docs/protocol.md#history) answer what the live read answered right after
that position committed, on both backends, with and without snapshots (and the reads of
live state without the snapshot's history rows, as their routes ask).

A scripted day of commands (every tier, refusals, two workspaces) runs through the real
pipeline; after each command every point-in-time read is taken live and remembered with the
head position. Afterwards each position is read back ``as_of`` it and must match exactly;
then a snapshot is stored mid-way and the same holds (the replay starts from it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec
import pytest
from sqlalchemy import Connection, func, select, update
from sqlalchemy.exc import DatabaseError
from tests.contract.test_rebuild import Driver, scripted_day

from eventcoord.api.queries.files import LIVE_CLAIMS_TABLES, heatmap_buckets, live_claims
from eventcoord.api.queries.issues import ISSUE_STATE_TABLES, LIST_LEASES_TABLES, about_issue, issue_state, list_leases
from eventcoord.api.queries.queue import LIST_QUEUE_TABLES, list_queue
from eventcoord.api.queries.sessions import LIST_AGENTS_TABLES, list_agents
from eventcoord.codec import format_time
from eventcoord.context import Caller
from eventcoord.errors import DomainError
from eventcoord.history import snapshots as snapshots_mod
from eventcoord.history import worker as worker_mod
from eventcoord.history.asof import History
from eventcoord.history.logreads import read_range
from eventcoord.history.scratch import build, rows_of
from eventcoord.history.worker import Snapshotter, SnapshotWorker, take_snapshot
from eventcoord.store import dbclock
from eventcoord.store.schema import events, snapshot_chunks, snapshots

WORKSPACES = ("default", "teamB")


def reads(workspace: str) -> dict[str, Any]:
    """Every point-in-time read of one workspace, as query functions."""
    return {name: fn for name, (fn, _) in reads_and_tables(workspace).items()}


#: A read answered from the live tables up to the position, not from a scratch.
UPTO = "upto"


class About(NamedTuple):
    """A read about one issue, answered from its stream (``History.read_about``)."""

    issue: str


def reads_and_tables(workspace: str) -> dict[str, tuple[Any, Any]]:
    """Every point-in-time read of one workspace, with the tables its route loads for it."""
    who = Caller(workspace, "admin")
    return {
        "agents": (lambda c: list_agents(c, workspace, None, 1000), LIST_AGENTS_TABLES),
        "leases": (lambda c: list_leases(c, workspace, None, None), LIST_LEASES_TABLES),
        "file_claims": (lambda c: live_claims(c, workspace, None, None, "", 1000), LIVE_CLAIMS_TABLES),
        # An issue's state is read about that issue (``History.read_about``: its stream).
        "state P-1": (lambda c: issue_state(c, who, "P-1", None), About("P-1")),
        "state P-2": (lambda c: issue_state(c, who, "P-2", None), About("P-2")),
        # The heatmap and the queue read the live tables up to the position (``History.read_upto``).
        "heatmap": (lambda c, p=None: heatmap_buckets(c, workspace, "claims", None, None, "", 2, None, p), UPTO),
        "contention": (
            lambda c, p=None: heatmap_buckets(c, workspace, "contention", None, None, "", 1, None, p),
            UPTO,
        ),
        "heatmap under src": (
            lambda c, p=None: heatmap_buckets(c, workspace, "claims", None, None, "src", 3, None, p),
            UPTO,
        ),
        "queue": (lambda c, p=None: list_queue(c, workspace, None, None, 0, 1000, p), UPTO),
        "queued then": (lambda c, p=None: list_queue(c, workspace, None, "queued", 0, 1000, p), UPTO),
        "running then": (lambda c, p=None: list_queue(c, workspace, None, "running", 0, 1, p), UPTO),
    }


#: The reads of live state only: their routes read ``as_of`` without history rows
#: (``History.read(history=False)``), and must answer exactly the same.
LIVE = frozenset({"leases", "file_claims", "state P-1", "state P-2"})


def as_json(value: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))


class Recorder(Driver):
    """A driver that takes every read right after each command, keyed by the head."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.seen: dict[int, dict[str, Any]] = {}
        self.ttl = 120

    async def set_ttl(self, seconds: int) -> None:
        self.ttl = seconds  # moments read under another TTL are not compared (as_of uses today's)
        await super().set_ttl(seconds)

    async def send(self, body: dict[str, Any], caller: Any = None) -> dict[str, Any] | None:
        result = await (super().send(body) if caller is None else super().send(body, caller))
        if self.ttl == 120:
            head = await self.store.head()

            def take(c: Connection) -> dict[str, Any]:
                return {ws: {name: as_json(fn(c)) for name, fn in reads(ws).items()} for ws in WORKSPACES}

            self.seen[head] = await self.store.query(take)
        return result


async def check_every_moment(history: History, seen: dict[int, dict[str, Any]]) -> None:
    for position, expected in sorted(seen.items()):
        for ws in WORKSPACES:
            for name, (fn, tables) in reads_and_tables(ws).items():
                # As the routes read it: a scratch of only the tables the read needs, or the
                # live tables up to the position.
                if tables == UPTO:
                    got, moment = await history.read_upto(ws, str(position), fn)
                elif isinstance(tables, About):
                    got, moment = await history.read_about(ws, str(position), fn, **about_issue(tables.issue))
                    # The same from a scratch of every issue: the snapshot's and the replay's.
                    assert as_json(got) == as_json(
                        (await history.read(ws, str(position), fn, history=False, tables=ISSUE_STATE_TABLES))[0]
                    )
                else:
                    got, moment = await history.read(ws, str(position), fn, history=name not in LIVE, tables=tables)
                assert moment.position == position
                assert as_json(got) == expected[ws][name], f"{name} of {ws} as of {position}"


async def test_as_of_every_position_equals_the_live_read_then(store: Any) -> None:
    d = Recorder(store)
    await scripted_day(d)
    assert len(d.seen) > 40
    history = History(store)
    try:
        await check_every_moment(history, d.seen)
        # A snapshot mid-way: moments after it replay from there, and still match.
        positions = sorted(d.seen)
        middle = positions[len(positions) // 2]
        assert await take_snapshot(store, middle) == middle
        history.close()
        await check_every_moment(history, d.seen)
        # A second one built on it (its history chunks reused, not rebuilt: it names the
        # first and only the history since) holds exactly the rows a replay from zero
        # gives, and moments after it still match.
        later = positions[3 * len(positions) // 4]
        assert await take_snapshot(store, later) == later
        assert await snapshot_rows(store, later) == await replayed_rows(store, later)

        def chain(c: Connection) -> tuple[Any, ...]:
            first, second = (snapshots_mod.nearest(c, p) for p in (middle, later))
            assert first is not None and second is not None
            return second, snapshots_mod.history_of(c, first), snapshots_mod.history_of(c, second)

        second, first_history, second_history = await store.query(chain)
        assert second.base == middle and not any(k.endswith("/history") for k in second.manifest)
        reused = [(k, ws, h) for k, per in first_history.items() for ws, hs in per.items() for h in hs]
        assert reused and all(h in second_history[k][ws] for k, ws, h in reused)
        assert all(
            h not in first_history.get(k, {}).get(ws, [])
            for k, per in second.history.items()
            for ws, hs in per.items()
            for h in hs
        )
        history.close()
        await check_every_moment(history, d.seen)
    finally:
        history.close()


async def test_a_scratch_of_some_tables_answers_their_reads_and_refuses_others(store: Any) -> None:
    await scripted_day(Driver(store))
    head = await store.head()
    events_, ttl = await store.query(lambda c: (read_range(c, 0, head), dbclock.ttl_seconds(c)))
    whole = build(head, None, ttl, None, {}, events_)
    some = build(head, None, ttl, None, {}, events_, [t.name for t in LIST_LEASES_TABLES])
    try:
        assert some.tables == {"leases", "sessions"}  # no issues, projects, files, queue …
        leases_then = some.read(lambda c: list_leases(c, "default", None, None))
        assert leases_then and leases_then == whole.read(lambda c: list_leases(c, "default", None, None))
        # The queue is not kept right in it: a read of it fails instead of answering wrongly.
        with pytest.raises(DatabaseError, match=r"access to work_items\.item_id is prohibited"):
            some.read(lambda c: list_queue(c, "default", None, None, 0, 1000))
        # A queue scratch also keeps the sessions its ledger names and the leases that say
        # who holds its items' issues (projections.READS; 0017_queue_held).
        assert build(head, None, ttl, None, {}, [], [t.name for t in LIST_QUEUE_TABLES]).tables == {
            "work_items",
            "work_ledger",
            "sessions",
            "leases",
        }
    finally:
        whole.close()
        some.close()


async def snapshot_rows(store: Any, position: int) -> dict[str, list[Any]]:
    """Every row a stored snapshot holds, by table, sorted."""

    def rows(c: Connection) -> dict[str, list[Any]]:
        snap = snapshots_mod.nearest(c, position)
        assert snap is not None and snap.position == position
        chunks = snapshots_mod.load_chunks(c, snap, None, tables=snapshots_mod.READ_MODEL_NAMES)
        return {name: sorted(r for d in datas for r in snapshots_mod.decode_chunk(d)) for name, datas in chunks.items()}

    return {k: v for k, v in (await store.query(rows)).items() if v}


async def counts_of(store: Any, position: int) -> tuple[list[Any], list[Any]]:
    """The path counts a stored snapshot holds, and the live rows' counts at its position."""

    def both(c: Connection) -> tuple[list[Any], list[Any]]:
        snap = snapshots_mod.nearest(c, position)
        assert snap is not None and snap.position == position
        chunks = snapshots_mod.load_chunks(c, snap, None, tables=("path_counts",))
        stored = sorted(r for d in chunks.get("path_counts", []) for r in snapshots_mod.decode_chunk(d))
        return stored, sorted(snapshots_mod.decode_chunk(snapshots_mod.counted_upto(c, position)))

    stored, counted = await store.query(both)
    return stored, counted


async def replayed_rows(store: Any, position: int) -> dict[str, list[Any]]:
    """Every read-model row right after ``position``, replayed from zero in a scratch."""
    events_, ttl = await store.query(lambda c: (read_range(c, 0, position), dbclock.ttl_seconds(c)))
    scratch = build(position, None, ttl, None, {}, events_)
    try:
        got = scratch.read(rows_of)
    finally:
        scratch.close()
    return {k: sorted(as_json(list(r)) for r in v) for k, v in got.items() if v}


async def test_as_of_a_time_is_the_last_position_recorded_at_or_before_it(store: Any) -> None:
    d = Driver(store)
    sid = await d.register(actor="ann")
    await d.send({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "P-1"})
    granted = await store.head()
    await d.send({"type": "release_issue", "session_id": sid, "issue": "P-1"})
    at_us = await store.query(
        lambda c: c.execute(select(events.c.recorded_us).where(events.c.position == granted)).scalar_one()
    )
    history = History(store)
    try:
        leases, moment = await history.read(
            "default", format_time(at_us), lambda c: list_leases(c, "default", None, None)
        )
        assert moment.position == granted and moment.at == format_time(at_us)
        assert [row["issue"] for row in leases] == ["P-1"]
        before, moment = await history.read(
            "default", "2000-01-01T00:00:00Z", lambda c: list_leases(c, "default", None, None)
        )
        assert before == [] and moment.position == 0
        now, _ = await history.read("default", str(await store.head()), lambda c: list_leases(c, "default", None, None))
        assert now == []
    finally:
        history.close()


@pytest.mark.parametrize("raw", ["999999", "yesterday", "-3", "1.5"])
async def test_as_of_past_the_head_or_not_a_moment_is_validation(store: Any, raw: str) -> None:
    d = Driver(store)
    await d.register(actor="ann")
    history = History(store)
    with pytest.raises(DomainError) as e:
        await history.read("default", raw, lambda c: list_leases(c, "default", None, None))
    assert e.value.code == "VALIDATION" and e.value.details["field"] == "as_of"


async def test_snapshots_every_n_events_share_unchanged_chunks(store: Any) -> None:
    d = Driver(store)
    sids = [await d.register(actor=f"a{i}") for i in range(150)]
    worker = SnapshotWorker(store, every=100)
    assert await worker.due()
    first = await take_snapshot(store)
    chunks_after_first = await store.query(
        lambda c: c.execute(select(func.count()).select_from(snapshot_chunks)).scalar_one()
    )
    assert not await worker.due()
    # One session changes: the next snapshot stores only the chunks holding changed rows.
    await d.send({"type": "heartbeat_agent", "session_id": sids[0]})
    second = await take_snapshot(store)
    assert second == first + 1
    chunks_after_second = await store.query(
        lambda c: c.execute(select(func.count()).select_from(snapshot_chunks)).scalar_one()
    )
    assert 0 < chunks_after_second - chunks_after_first <= 2
    assert await store.query(lambda c: c.execute(select(func.count()).select_from(snapshots)).scalar_one()) == 2


async def test_a_snapshotter_builds_each_snapshot_on_its_last_and_each_is_the_replay(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's way: one scratch, loaded once, advanced by the events since each snapshot,
    re-cutting only the chunks of changed rows. Every snapshot must hold exactly the rows a
    replay from zero gives, history included (the kept scratch forgets its history rows once
    they are stored, so a snapshot's history is the previous one's plus what became final)."""
    builds: list[int] = []
    real_build = worker_mod.build

    def counted(*args: Any, **kwargs: Any) -> Any:
        builds.append(args[0])
        return real_build(*args, **kwargs)

    monkeypatch.setattr(worker_mod, "build", counted)
    d = Driver(store)
    await scripted_day(d)
    middle = await store.head()
    await scripted_day(d)  # the same day again: rows change, end, and come back
    head = await store.head()
    positions = sorted({middle // 3, 2 * middle // 3, middle, (middle + head) // 2, head})
    snapshotter = Snapshotter(store)
    try:
        for p in positions:
            assert await snapshotter.take(p) == p
            assert await snapshot_rows(store, p) == await replayed_rows(store, p), f"snapshot at {p}"
            stored, counted = await counts_of(store, p)
            assert stored == counted, f"path counts at {p}"
        assert stored, "claims were made by then: there are counts"
        assert builds == [positions[0]], "every snapshot after the first builds on the kept scratch"
        # Asked for a moment before the kept one, it builds afresh from the nearest stored snapshot.
        earlier = positions[1] + 1
        assert await snapshotter.take(earlier) == earlier
        assert await snapshot_rows(store, earlier) == await replayed_rows(store, earlier)
        assert builds == [positions[0], earlier]
    finally:
        snapshotter.close()


async def test_a_snapshot_stored_before_the_chain_roots_the_next_one(store: Any) -> None:
    """Snapshots written before 0008_snapshot_chain name all their history in the manifest:
    the next snapshot extends one as it would a new one, and both hold the replay's rows."""
    d = Driver(store)
    await scripted_day(d)
    first = await store.head()
    assert await take_snapshot(store, first) == first

    def as_before_the_chain(c: Connection) -> None:
        snap = snapshots_mod.nearest(c, first)
        assert snap is not None and snap.history is not None
        whole = {**snap.manifest, **snapshots_mod.history_of(c, snap)}
        del whole["path_counts"]  # nor did it count paths: the next one counts them from the rows
        c.execute(
            update(snapshots)
            .where(snapshots.c.position == first)
            .values(manifest=msgspec.json.encode(whole).decode(), history=None, base_position=None)
        )

    await store.transact(as_before_the_chain)
    await scripted_day(d)
    head = await store.head()
    assert await take_snapshot(store, head) == head
    second = await store.query(lambda c: snapshots_mod.nearest(c, head))
    assert second is not None and second.base == first
    assert await snapshot_rows(store, first) == await replayed_rows(store, first)
    assert await snapshot_rows(store, head) == await replayed_rows(store, head)
    stored, counted = await counts_of(store, head)
    assert stored and stored == counted
