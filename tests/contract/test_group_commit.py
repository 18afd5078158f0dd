"""Group commit: commands that share a transaction still succeed or fail one by one.

Both stores commit the commands waiting at a moment in one transaction. These tests send
commands concurrently (so they do share one) and check what docs/protocol.md#positions fixes: each command
sees the ones before it, a refusal or a failed statement undoes only its own command,
positions stay contiguous and match the answers, a race lost inside the database is
decided again, and on PostgreSQL no provisional position ever reaches a reader or a
committed row, and two replicas whose batches hold crossed row locks both go through.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import BigInteger, Connection, Integer, func, insert, select, text, update
from sqlalchemy.util import await_

from eventcoord.api.answers import outcome_response
from eventcoord.codec import EventMetadata, decode_command
from eventcoord.context import Caller
from eventcoord.domain.paths import overlaps
from eventcoord.errors import ConcurrencyError, DomainError
from eventcoord.events import AgentHeartbeat
from eventcoord.history.check import check
from eventcoord.metrics import REGISTRY
from eventcoord.projections.tables import READ_MODEL_TABLES
from eventcoord.projections.tables import sessions as sessions_table
from eventcoord.service import Outcome, Service
from eventcoord.store import dbclock, log, open_store
from eventcoord.store.log import NewEvent
from eventcoord.store.postgres.batch import PROVISIONAL_BASE
from eventcoord.store.schema import events, guards

OPERATOR = Caller("default", "admin", operator=True)


def stat(name: str) -> float:
    return REGISTRY.get_sample_value(f"eventcoord_store_{name}_total") or 0.0


def encoded(outcome: Outcome) -> bytes:
    """The answer envelope the API would send for ``outcome``."""
    return bytes(outcome_response(outcome).content)


async def execute(service: Service, body: dict[str, Any]) -> Outcome | DomainError:
    try:
        return await service.execute(OPERATOR, decode_command(json.dumps(body).encode()))
    except DomainError as e:
        return e


def appender(tag: str, refuse: bool = False) -> Any:
    """A transaction that appends one event to stream ``t:<tag>``; optionally refuses after."""

    def run(conn: Connection) -> log.Pending[int]:
        now_us, _ = dbclock.read(conn)
        [recorded] = log.append(
            conn, [NewEvent(f"t:{tag}", AgentHeartbeat(session_id=tag), EventMetadata(workspace="ws"))], now_us
        )
        if refuse:
            raise DomainError("NOT_HOLDER", "refused after writing")
        return log.Pending(lambda real: real(recorded.position))

    return run


@contextlib.asynccontextmanager
async def two_replicas(db_url: str) -> AsyncIterator[tuple[Any, Any]]:
    """Two started stores on one database (two replicas), migrated once, closed after."""
    a, b = open_store(db_url), open_store(db_url)
    for s in (a, b):
        await s.start()
    await a.migrate()
    try:
        yield a, b
    finally:
        for s in (a, b):
            await s.close()


async def assert_log_matches(store: Any, positions: dict[str, int]) -> None:
    """The log is 1..n with no gap, and each stream ``t:<tag>`` sits where its answer said."""
    events = await store.read(limit=1000)
    assert [e.position for e in events] == list(range(1, len(events) + 1))
    assert {e.stream: e.position for e in events} == {f"t:{tag}": p for tag, p in positions.items()}


async def test_commands_of_one_batch_see_each_other(store: Any) -> None:
    service = Service(store)
    sessions = []
    for i in range(20):
        answer = await execute(service, {"type": "register_agent", "actor": f"a{i}"})
        assert isinstance(answer, Outcome)
        sessions.append(json.loads(encoded(answer))["result"]["session_id"])
    batches, commands = stat("batches"), stat("batched")
    race = await asyncio.gather(
        *(execute(service, {"type": "claim_issue", "session_id": s, "project": "P", "issue": "HOT"}) for s in sessions),
        *(execute(service, {"type": "heartbeat_agent", "session_id": s}) for s in sessions),
    )
    # They shared transactions, and each claim saw the grant committed before it.
    assert stat("batched") - commands == 40 and stat("batches") - batches < 40
    granted = [a for a in race[:20] if isinstance(a, Outcome)]
    assert len(granted) == 1
    assert all(isinstance(a, DomainError) and a.code == "ISSUE_HELD" for a in race[:20] if a not in granted)
    assert all(isinstance(a, Outcome) and a.status == 200 for a in race[20:])
    events = await store.read(limit=1000)
    assert [e.position for e in events] == list(range(1, len(events) + 1))
    by_position = {e.position: e.type for e in events}
    for answer in [a for a in race if isinstance(a, Outcome)]:
        body = json.loads(encoded(answer))
        assert body["position"] == answer.position == body["events"][-1]["position"]
        assert all(by_position[ref["position"]] == ref["type"] for ref in body["events"])


async def test_a_refusal_after_writing_undoes_only_its_own_command(store: Any) -> None:
    results = await asyncio.gather(
        *(store.transact(appender(str(i), refuse=i % 3 == 1)) for i in range(9)), return_exceptions=True
    )
    refused = [i for i, r in enumerate(results) if isinstance(r, DomainError)]
    assert refused == [1, 4, 7]
    positions = {str(i): r for i, r in enumerate(results) if isinstance(r, int)}
    assert sorted(positions.values()) == list(range(1, 7))
    await assert_log_matches(store, positions)


async def test_a_failed_statement_fails_only_its_own_command(store: Any) -> None:
    await store.transact(lambda c: c.execute(insert(guards).values(workspace="ws", key="taken")))

    def duplicate(conn: Connection) -> None:
        conn.execute(insert(guards).values(workspace="ws", key="taken"))

    jobs = [
        store.transact(duplicate, retry=False) if i % 3 == 1 else store.transact(appender(str(i))) for i in range(9)
    ]
    results = await asyncio.gather(*jobs, return_exceptions=True)
    assert [i for i, r in enumerate(results) if isinstance(r, ConcurrencyError)] == [1, 4, 7]
    positions = {str(i): r for i, r in enumerate(results) if isinstance(r, int)}
    assert sorted(positions.values()) == list(range(1, 7))
    await assert_log_matches(store, positions)


async def test_one_command_id_sent_many_times_at_once_is_decided_once(store: Any) -> None:
    service = Service(store)
    body = {"type": "register_agent", "actor": "once", "command_id": "same-id"}
    answers = await asyncio.gather(*(execute(service, body) for _ in range(12)))
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers)
    assert len({encoded(a) for a in answers if isinstance(a, Outcome)}) == 1
    assert [e.type for e in await store.read()] == ["AgentRegistered"]


async def test_a_lost_race_is_decided_again_in_a_later_transaction(store: Any, backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("SQLite's single writer loses no race inside the database")
    from eventcoord.store.postgres.writer import RETRIES

    calls = {"flaky": 0, "hopeless": 0}
    append = appender("flaky")

    def flaky(conn: Connection) -> log.Pending[int]:
        calls["flaky"] += 1
        if calls["flaky"] < 3:
            raise ConcurrencyError("lost")
        return append(conn)

    def hopeless(conn: Connection) -> None:
        calls["hopeless"] += 1
        raise ConcurrencyError("always lost")

    neighbours = [store.transact(appender(str(i))) for i in range(4)]
    results = await asyncio.gather(store.transact(flaky), store.transact(hopeless), *neighbours, return_exceptions=True)
    assert calls == {"flaky": 3, "hopeless": RETRIES}
    assert isinstance(results[1], ConcurrencyError)
    positions = {"flaky": results[0], **{str(i): r for i, r in enumerate(results[2:])}}
    assert sorted(positions.values()) == list(range(1, 6))
    await assert_log_matches(store, positions)  # type: ignore[arg-type]
    # retry=False: the first lost race is the answer.
    calls["hopeless"] = 0
    with pytest.raises(ConcurrencyError):
        await store.transact(hopeless, retry=False)
    assert calls["hopeless"] == 1


async def test_no_provisional_position_reaches_a_committed_row(store: Any, backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("only PostgreSQL batches hand out provisional positions")
    service = Service(store)
    sessions = []
    for i in range(8):
        answer = await execute(service, {"type": "register_agent", "actor": f"a{i}"})
        assert isinstance(answer, Outcome)
        sessions.append(json.loads(encoded(answer))["result"]["session_id"])
    await execute(service, {"type": "configure_project", "project": "W", "wip_limit": 100})
    mix: list[dict[str, Any]] = []
    for i, s in enumerate(sessions):
        mix += [
            {"type": "claim_issue", "session_id": s, "project": "P", "issue": f"P-{i % 5}"},
            {"type": "claim_files", "session_id": s, "issue": f"P-{i}", "paths": [f"src/{i % 3}/", f"docs/{i}.md"]},
            {"type": "post_message", "session_id": s, "channel": "project:P", "body": f"hello {i}"},
            {"type": "enqueue_work", "project": "W", "issue": f"W-{i}", "priority": i % 3},
            {"type": "claim_next_work", "session_id": s, "project": "W"},
            {"type": "release_issue", "session_id": s, "issue": f"P-{i % 5}"},
        ]
    # Places in line hold positions too: all but one of each group wait (and stay waiting).
    mix += [{"type": "claim_issue", "session_id": s, "project": "Q", "issue": "Q-1", "wait": True} for s in sessions]
    mix += [{"type": "acquire_lease", "session_id": s, "name": "deploy", "wait": True} for s in sessions]
    answers = await asyncio.gather(*(execute(service, body) for body in mix))
    assert any(isinstance(a, Outcome) and a.status == 200 for a in answers)
    head = await store.head()
    assert 0 < head < PROVISIONAL_BASE

    def largest_numbers(conn: Connection) -> dict[str, int]:
        out = {}
        for table in READ_MODEL_TABLES:
            for column in table.columns:
                if isinstance(column.type, BigInteger | Integer):
                    out[f"{table.name}.{column.name}"] = int(conn.execute(select(func.max(column))).scalar() or 0)
        return out

    largest = await store.query(largest_numbers)
    assert all(v < PROVISIONAL_BASE for v in largest.values()), largest
    # The mix left a position in every column that holds one: a table the end statement
    # failed to renumber (it renumbers only those the batch wrote) is caught above.
    holding = [f"{t.name}.{c.name}" for t in READ_MODEL_TABLES for c in t.columns if c.info.get("position")]
    assert len(holding) >= 7 and all(largest[k] > 0 for k in holding), largest
    # Every position a read model holds is the position of an event of the log.
    assert (
        max(v for k, v in largest.items() if k.split(".")[1] in ("position", "lease_id", "enqueued_position")) <= head
    )
    for answer in answers:
        if isinstance(answer, Outcome):
            assert answer.position <= head
            assert all(ref["position"] <= head for ref in json.loads(encoded(answer))["events"])


async def test_crossed_row_locks_of_two_replicas_both_go_through(db_url: str, backend: str) -> None:
    """Replica A's batch locks X then wants Y; replica B's locks Y then wants X.

    Each lock is taken by a different command of the batch, so no lock order inside one
    command can prevent the cycle. The second command of each batch gives up its wait
    after a short lock timeout and is decided again first in its next batch: all four
    commit, and no deadlock had to be detected (no race was lost).
    """
    if backend != "postgresql":
        pytest.skip("two replicas share one database only on PostgreSQL")
    async with two_replicas(db_url) as (a, b):
        await a.transact(
            lambda c: c.execute(insert(guards), [{"workspace": "ws", "key": "X"}, {"workspace": "ws", "key": "Y"}])
        )
        a_has_x, b_has_y = asyncio.Event(), asyncio.Event()

        def lock(key: str, have: asyncio.Event | None = None, want: asyncio.Event | None = None) -> Any:
            append = appender(f"{key}-{id(have)}-{id(want)}")

            def run(conn: Connection) -> log.Pending[int]:
                conn.execute(
                    select(guards.c.key).where((guards.c.workspace == "ws") & (guards.c.key == key)).with_for_update()
                )
                if have is not None:
                    have.set()
                if want is not None:
                    await_(asyncio.wait_for(want.wait(), 10))
                return append(conn)

            return run

        lost, again = stat("lost_races"), stat("again")
        results = await asyncio.gather(
            a.transact(lock("X", have=a_has_x, want=b_has_y)),
            a.transact(lock("Y")),
            b.transact(lock("Y", have=b_has_y, want=a_has_x)),
            b.transact(lock("X")),
        )
        assert sorted(results) == [1, 2, 3, 4]
        assert stat("lost_races") == lost and stat("again") > again
        events = await a.read()
        assert [e.position for e in events] == [1, 2, 3, 4]


async def test_stream_versions_follow_positions_when_assigned_at_commit(store: Any) -> None:
    """Appends without an expected version, many per transaction: versions are 1..n per stream."""

    async def write(i: int) -> list[Any]:
        stream = "session:shared" if i % 2 else f"session:{i % 5}"
        recorded: list[Any] = await store.append("ws", stream, None, [AgentHeartbeat(session_id=str(i))] * (1 + i % 3))
        return recorded

    async def write_expecting(i: int) -> list[Any]:
        # Expected versions in the same transactions: a new stream, and the shared one.
        recorded: list[Any] = await store.append("ws", f"pinned:{i}", 0, [AgentHeartbeat(session_id=f"p{i}")] * 2)
        with contextlib.suppress(ConcurrencyError):  # -1 never matches; 0 only if nothing committed before
            recorded += await store.append("ws", "session:shared", -1 if i else 0, [AgentHeartbeat(session_id="x")])
        return recorded

    batches = await asyncio.gather(*(write(i) for i in range(40)), *(write_expecting(i) for i in range(6)))
    answered = [r for rs in batches for r in rs]
    events = await store.read(limit=1000)
    assert sorted((r.position, r.stream, r.version) for r in answered) == [
        (e.position, e.stream, e.version) for e in events
    ]
    by_stream: dict[str, list[int]] = {}
    for e in events:
        by_stream.setdefault(e.stream, []).append(e.version)
    assert all(versions == list(range(1, len(versions) + 1)) for versions in by_stream.values())
    # An expected version still decides alone, against the versions committed so far.
    with pytest.raises(ConcurrencyError):
        await store.append("ws", "session:shared", 1, [AgentHeartbeat(session_id="late")])
    [late] = await store.append(
        "ws", "session:shared", len(by_stream["session:shared"]), [AgentHeartbeat(session_id="late")]
    )
    assert (late.position, late.version) == (len(events) + 1, len(by_stream["session:shared"]) + 1)


async def test_a_batch_waits_for_the_counter_as_long_as_another_replica_holds_it(db_url: str, backend: str) -> None:
    """Only lock waits while deciding are cut short; the end statement's wait for the counter is not."""
    if backend != "postgresql":
        pytest.skip("two replicas share one database only on PostgreSQL")
    async with two_replicas(db_url) as (a, b):
        pinned = asyncio.Event()

        def hold_the_counter(conn: Connection) -> log.Pending[int]:
            now_us, _ = dbclock.read(conn)
            # An expected version takes the counter's lock while deciding; then dawdle.
            [r] = log.append(
                conn,
                [NewEvent("held", AgentHeartbeat(session_id="h"), EventMetadata(workspace="ws"))],
                now_us,
                {"held": 0},
            )
            pinned.set()
            await_(asyncio.sleep(0.3))
            return log.Pending(lambda real: real(r.position))

        lost = stat("lost_races")
        holder = asyncio.create_task(b.transact(hold_the_counter, retry=False))
        await pinned.wait()
        results = await asyncio.gather(*(a.transact(appender(str(i))) for i in range(3)))
        assert await holder == 1
        assert sorted(results) == [2, 3, 4] and stat("lost_races") == lost


async def test_a_lone_command_waits_for_a_lock_as_long_as_its_holder_keeps_it(db_url: str, backend: str) -> None:
    """The short lock wait never refuses the first command of a batch: it waits, then decides."""
    if backend != "postgresql":
        pytest.skip("two replicas share one database only on PostgreSQL")
    from eventcoord.store.postgres.writer import LOCK_WAIT_MS

    async with two_replicas(db_url) as (a, b):
        await a.transact(lambda c: c.execute(insert(guards).values(workspace="ws", key="X")))
        locked = asyncio.Event()
        lock_x = select(guards.c.key).where((guards.c.workspace == "ws") & (guards.c.key == "X")).with_for_update()
        append_a, append_b = appender("a"), appender("b")

        def hold(conn: Connection) -> log.Pending[int]:
            conn.execute(lock_x)
            locked.set()
            await_(asyncio.sleep(6 * LOCK_WAIT_MS / 1000))
            return append_b(conn)

        def wait_for_x(conn: Connection) -> log.Pending[int]:
            conn.execute(lock_x)
            return append_a(conn)

        lost, rollbacks = stat("lost_races"), stat("batch_rollbacks")
        holder = asyncio.create_task(b.transact(hold))
        await locked.wait()
        assert await a.transact(wait_for_x) == 2
        assert await holder == 1
        assert stat("lost_races") == lost and stat("batch_rollbacks") > rollbacks


async def test_two_writers_in_one_replica_keep_the_log_contiguous(db_url: str, backend: str) -> None:
    """Two batches in flight in one process race like two replicas: the database decides."""
    if backend != "postgresql":
        pytest.skip("only the PostgreSQL store has several writers")
    from eventcoord.store.postgres.store import PostgresEventStore

    store = PostgresEventStore(db_url, writers=2)
    await store.start()
    await store.migrate()
    try:
        service = Service(store)
        sessions = [
            json.loads(encoded(a))["result"]["session_id"]
            for a in await asyncio.gather(
                *(
                    service.execute(
                        OPERATOR, decode_command(json.dumps({"type": "register_agent", "actor": f"w{i}"}).encode())
                    )
                    for i in range(24)
                )
            )
        ]
        race = await asyncio.gather(
            *(
                execute(service, {"type": "claim_issue", "session_id": s, "project": "P", "issue": "HOT"})
                for s in sessions
            ),
            *(store.transact(appender(str(i))) for i in range(40)),
        )
        assert sum(isinstance(a, Outcome) for a in race[:24]) == 1
        events = await store.read(limit=1000)
        assert [e.position for e in events] == list(range(1, len(events) + 1))
        assert sorted(race[24:]) == sorted(e.position for e in events if e.stream.startswith("t:"))  # type: ignore[type-var]
    finally:
        await store.close()


@pytest.mark.parametrize("existing", [False, True], ids=["new guard", "existing guard"])
@pytest.mark.parametrize("how", ["lock_guard", "lock_project_rules", "load_session_and_lock_guard"])
async def test_a_guard_locked_in_one_statement_holds_off_another_replica(
    db_url: str, backend: str, existing: bool, how: str
) -> None:
    """The guard's one upsert (alone, or carried by a read) locks a row it finds or inserts.

    Replica B takes the guard and keeps it 300 ms; replica A's lock of the same guard is
    granted only after B committed, whether the row existed before or B inserted it.
    """
    if backend != "postgresql":
        pytest.skip("two replicas share one database only on PostgreSQL")
    from eventcoord.context import Context
    from eventcoord.domain import streams
    from eventcoord.reads.common import load_session_and_lock_guard, lock_guard
    from eventcoord.reads.issues import lock_project_rules

    key = streams.project("P")

    def take(conn: Connection) -> None:
        if how == "lock_guard":
            lock_guard(conn, "ws", key)
            return
        now_us, ttl = dbclock.read(conn)
        ctx = Context(Caller("ws", "agent"), now_us, ttl)
        if how == "lock_project_rules":
            assert lock_project_rules(conn, ctx, "P").wip_limit == 3
        else:
            assert load_session_and_lock_guard(conn, ctx, "s-nobody", key) is None

    async with two_replicas(db_url) as (a, b):
        if existing:
            await a.transact(lambda c: c.execute(insert(guards).values(workspace="ws", key=key)))
        taken = asyncio.Event()
        released_at: list[float] = []
        loop = asyncio.get_running_loop()

        def hold(conn: Connection) -> None:
            take(conn)
            taken.set()
            await_(asyncio.sleep(0.3))
            released_at.append(loop.time())

        def follow(conn: Connection) -> float:
            take(conn)
            return loop.time()

        holder = asyncio.create_task(b.transact(hold))
        await taken.wait()
        granted_at = await a.transact(follow)
        await holder
        assert granted_at >= released_at[0]
        rows = await a.query(lambda c: c.execute(select(func.count()).select_from(guards)).scalar_one())
        assert rows == 1


@pytest.mark.parametrize("fresh_for", [0.020, 0.0], ids=["clock carried over", "clock read again"])
async def test_chained_batches_keep_the_log_contiguous_and_the_clock_moving_forward(
    db_url: str, backend: str, fresh_for: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A COMMIT that begins the next batch's transaction changes nothing a reader can see.

    One writer, bursts of commands waiting: batches chain (the counter says so); positions
    stay 1..n and each answer names its own; a command refused after writing is undone
    alone, and the careful batches after it (savepoints, the usual lock wait for their
    first command) chain too; with one writer the database clock of each event never runs
    backwards along the log, whether the next batch takes the end statement's clock or
    reads it again.
    """
    if backend != "postgresql":
        pytest.skip("only the PostgreSQL store chains its batches")
    from eventcoord.store.postgres import writer as pg_writer
    from eventcoord.store.postgres.store import PostgresEventStore

    monkeypatch.setattr(pg_writer, "CHAIN_FRESH_S", fresh_for)
    store = PostgresEventStore(db_url, writers=1)
    await store.start()
    await store.migrate()
    try:
        chained, rollbacks = stat("chained"), stat("batch_rollbacks")
        results = await asyncio.gather(
            *(store.transact(appender(str(i), refuse=i == 70)) for i in range(300)), return_exceptions=True
        )
        assert isinstance(results[70], DomainError)
        assert stat("chained") - chained >= 3 and stat("batch_rollbacks") - rollbacks >= 1
        positions = {str(i): r for i, r in enumerate(results) if isinstance(r, int)}
        assert sorted(positions.values()) == list(range(1, 300))
        await assert_log_matches(store, positions)
        order = select(events.c.recorded_us).order_by(events.c.position)
        times = await store.query(lambda c: list(c.execute(order).scalars()))
        assert len(times) == 299 and times == sorted(times)
    finally:
        await store.close()


async def _register(service: Service, actor: str) -> str:
    answer = await execute(service, {"type": "register_agent", "actor": actor})
    assert isinstance(answer, Outcome)
    return str(json.loads(encoded(answer))["result"]["session_id"])


def _gone_quiet(sid: str) -> Any:
    """A transaction that moves a session's last sign of life an hour back (it looks dead)."""

    def run(conn: Connection) -> None:
        conn.execute(
            sessions_table.update()
            .where(sessions_table.c.session_id == sid)
            .values(last_seen_us=sessions_table.c.last_seen_us - 3_600_000_000)
        )

    return run


async def test_a_heartbeat_revives_its_session_for_the_next_command_of_its_batch(store: Any) -> None:
    """On PostgreSQL a heartbeat's write is carried to the batch's end; a later command of
    the batch that reads that session's liveness must still see it."""
    service = Service(store)
    holder, other = await _register(service, "holder"), await _register(service, "other")
    for issue in ("P-1", "P-2"):
        answer = await execute(service, {"type": "claim_issue", "session_id": holder, "project": "P", "issue": issue})
        assert isinstance(answer, Outcome) and answer.status == 200
    # Without a heartbeat, a quiet holder's issue goes to whoever claims it (the control).
    await store.transact(_gone_quiet(holder))
    taken = await execute(service, {"type": "claim_issue", "session_id": other, "project": "P", "issue": "P-2"})
    assert isinstance(taken, Outcome) and taken.status == 200, taken
    # The holder's heartbeat and the other's claim, in one batch, in that order.
    await store.transact(_gone_quiet(holder))
    batches = stat("batches")
    beat, claim = await asyncio.gather(
        execute(service, {"type": "heartbeat_agent", "session_id": holder}),
        execute(service, {"type": "claim_issue", "session_id": other, "project": "P", "issue": "P-1"}),
    )
    if store.dialect == "postgresql":
        assert stat("batches") == batches + 1  # one transaction: the heartbeat was carried
    assert isinstance(beat, Outcome) and beat.status == 200
    assert isinstance(claim, DomainError) and claim.code == "ISSUE_HELD", claim


@contextlib.contextmanager
def statements_sent() -> Iterator[list[str]]:
    """Every statement sent through asyncpg meanwhile (each one a round trip)."""
    sent: list[str] = []
    originals = {name: getattr(asyncpg.Connection, name) for name in ("execute", "executemany", "fetch", "fetchrow")}

    def counting(name: str) -> Any:
        original = originals[name]

        async def call(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
            sent.append(query)
            return await original(self, query, *args, **kwargs)

        return call

    for name in originals:
        setattr(asyncpg.Connection, name, counting(name))
    try:
        yield sent
    finally:
        for name, original in originals.items():
            setattr(asyncpg.Connection, name, original)


async def _sixteen_agents(store: Any, backend: str) -> tuple[Service, list[str]]:
    """A service and 16 registered sessions, for counting a batch's statements (PostgreSQL)."""
    if backend != "postgresql":
        pytest.skip("round trips to the database are PostgreSQL's cost")
    service = Service(store)
    return service, [await _register(service, f"a{i}") for i in range(16)]


async def test_a_batch_of_heartbeats_reads_every_session_at_once_and_writes_them_all_at_once(
    store: Any, backend: str
) -> None:
    service, sids = await _sixteen_agents(store, backend)
    before = await store.query(
        lambda conn: dict(conn.execute(select(sessions_table.c.session_id, sessions_table.c.last_seen_us)).all())
    )
    # every other one declares what it works on (written with the batch's end statement)
    beats = [
        {"type": "heartbeat_agent", "session_id": s, **({"working_on": f"P-{i}"} if i % 2 else {})}
        for i, s in enumerate(sids)
    ]
    with statements_sent() as sent:
        answers = await asyncio.gather(*(execute(service, body) for body in beats))
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers)
    # BEGIN, the clock, one read of every session (ahead of the commands), the carried
    # heartbeats, the end, COMMIT (the first heartbeat may be a batch of its own, with a
    # read of its own: the writer was idle).
    assert sum("SKIP LOCKED" in q for q in sent) == 1, sent
    assert len(sent) <= 5 + 5, sent
    rows = await store.query(
        lambda conn: {
            sid: (n, seen, on)
            for sid, n, seen, on in conn.execute(
                select(
                    sessions_table.c.session_id,
                    sessions_table.c.heartbeats,
                    sessions_table.c.last_seen_us,
                    sessions_table.c.working_on,
                )
            )
        }
    )
    for i, s in enumerate(sids):
        n, seen, on = rows[s]
        assert n == 1 and seen > before[s] and on == (f"P-{i}" if i % 2 else None), (s, rows[s])


async def _claims_in_one_project(
    service: Service, sids: list[str], project: str, wip_limit: int
) -> tuple[list[Outcome | DomainError], list[str]]:
    """Each session claims an issue of ``project`` (its WIP limit set first), all at once:
    the answers and the statements sent."""
    await execute(service, {"type": "configure_project", "project": project, "wip_limit": wip_limit})
    with statements_sent() as sent:
        answers = await asyncio.gather(
            *(
                execute(
                    service, {"type": "claim_issue", "session_id": s, "project": project, "issue": f"{project}-{i}"}
                )
                for i, s in enumerate(sids)
            )
        )
    return list(answers), sent


async def test_a_command_s_writes_go_with_the_next_command_s_first_statement(store: Any, backend: str) -> None:
    service, sids = await _sixteen_agents(store, backend)
    answers, sent = await _claims_in_one_project(service, sids, "P", 100)
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers
    # At most, per claim: its session and guard, then its reads (3 with its writes sent
    # alone); the batch's BEGIN, clock, last writes, end and COMMIT (and the first claim,
    # maybe alone). Their rows are now read ahead together (the next test counts them).
    assert len(sent) <= 2 * len(sids) + 5 + 6, sent
    leases = await store.query(lambda conn: conn.execute(text("SELECT issue, session_id FROM leases")).all())
    assert sorted(leases) == sorted((f"P-{i}", s) for i, s in enumerate(sids))
    with statements_sent() as sent:
        answers = await asyncio.gather(
            *(
                execute(service, {"type": "release_issue", "session_id": s, "issue": f"P-{i}"})
                for i, s in enumerate(sids)
            )
        )
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers
    # Per release: its session and lease, its project's guard, the lease locked; the lease
    # released and counted off its project go with the next one's first read.
    assert len(sent) <= 3 * len(sids) + 5 + 7, sent
    unreleased = await store.query(lambda conn: conn.execute(text("SELECT unreleased FROM project_leases")).all())
    assert unreleased == [(0,)]


async def test_a_session_row_read_ahead_is_not_used_once_the_batch_wrote_it(store: Any) -> None:
    """A batch reads its heartbeats' sessions ahead (PostgreSQL); a session ended earlier in
    the batch must be read again, and its heartbeat refused."""
    service = Service(store)
    ending, other = await _register(service, "ending"), await _register(service, "other")
    end, beat, other_beat = await asyncio.gather(
        execute(service, {"type": "end_agent", "session_id": ending}),
        execute(service, {"type": "heartbeat_agent", "session_id": ending}),
        execute(service, {"type": "heartbeat_agent", "session_id": other}),
    )
    assert isinstance(end, Outcome) and end.status == 200, end
    assert isinstance(beat, DomainError) and beat.code == "SESSION_NOT_LIVE", beat
    assert isinstance(other_beat, Outcome) and other_beat.status == 200, other_beat


async def test_a_file_claim_s_paths_go_with_the_next_command_s_first_statement(store: Any, backend: str) -> None:
    service, sids = await _sixteen_agents(store, backend)
    with statements_sent() as sent:
        answers = await asyncio.gather(
            *(
                execute(
                    service,
                    {"type": "claim_files", "session_id": s, "issue": f"P-{i}", "paths": [f"src/{i}/", f"doc/{i}.md"]},
                )
                for i, s in enumerate(sids)
            )
        )
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers
    # Once the batch holds the workspace's lock, one statement per claim: its session and its
    # probes, carrying the claim before's paths (their keys lie outside its probes' ranges);
    # the batch's BEGIN, clock, lock, last writes, end and COMMIT (and the first claim may be
    # a batch of its own, of its session, the lock, its probes). Was three per claim.
    assert len(sent) <= len(sids) + 6 + 6, sent
    claims = await store.query(
        lambda conn: conn.execute(text("SELECT issue, idx, path FROM file_claims ORDER BY position, idx")).all()
    )
    assert claims == [row for i in range(16) for row in ((f"P-{i}", 0, f"src/{i}/"), (f"P-{i}", 1, f"doc/{i}.md"))]
    # Releases: the workspace's row exists now, so the batch locks it ahead and reads every
    # release's session, whether anyone waits for files, and its claims of the issue in one
    # statement; their writes go with the end statement. Was four per release, then one.
    with statements_sent() as sent:
        answers = await asyncio.gather(
            *(
                execute(service, {"type": "release_files", "session_id": s, "issue": f"P-{i}"})
                for i, s in enumerate(sids)
            )
        )
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers
    assert sum("AS q(ws, sid, key, n)" in q for q in sent) >= 1, sent
    # BEGIN, clock, the lock ahead, the read ahead, the releases' writes, end, COMMIT (and
    # the first release may be a batch of its own, of four statements more).
    assert len(sent) <= 8 + 8, sent
    live = await store.query(
        lambda conn: conn.execute(text("SELECT count(*) FROM file_claims WHERE released_us IS NULL"))
    )
    assert live.scalar_one() == 0


@pytest.mark.parametrize("read_ahead", [False, True], ids=["lock-taken-by-a-claim", "read-ahead"])
async def test_overlapping_file_claims_in_one_batch_are_granted_to_one_of_them(store: Any, read_ahead: bool) -> None:
    """Claims of one batch see the claims granted before them in it, though their writes
    are deferred: on PostgreSQL a claim's insert goes with the next claim's probes only
    where its keys lie outside their ranges, else it is sent first. With ``read_ahead``
    the workspace's row exists (an earlier claim made it), so a PostgreSQL batch locks it
    and reads every claim's session and probes ahead: a claim's insert must forget the
    reads ahead whose ranges hold one of its keys, and only those."""
    service = Service(store)
    sids = [await _register(service, f"a{i}") for i in range(16)]
    if read_ahead:
        seed = await execute(service, {"type": "claim_files", "session_id": sids[0], "issue": "S", "paths": ["x/"]})
        assert isinstance(seed, Outcome) and seed.status == 200, seed
    # in pairs, one after the other: a directory, then a file in it (or the same path again)
    wanted = [
        [f"src/m{i // 2}/" if i % 2 == 0 else f"src/m{i // 2}/{'' if i % 4 == 3 else 'f.py'}", f"own/{i}.py"]
        for i in range(16)
    ]
    answers = await asyncio.gather(
        *(
            execute(service, {"type": "claim_files", "session_id": s, "issue": f"P-{i}", "paths": wanted[i]})
            for i, s in enumerate(sids)
        )
    )
    assert all(isinstance(a, Outcome) and a.status in (200, 409) for a in answers), answers
    granted = [i for i, a in enumerate(answers) if isinstance(a, Outcome) and a.status == 200]
    assert granted == list(range(0, 16, 2)), answers  # refused: a ClaimConflict recorded, answered 409
    live = await store.query(
        lambda conn: conn.execute(
            text("SELECT issue, path FROM file_claims WHERE released_us IS NULL AND issue <> 'S'")
        ).all()
    )
    assert sorted(live) == sorted((f"P-{i}", p) for i in granted for p in wanted[i])
    for (issue, path), (other_issue, other_path) in itertools.combinations(live, 2):
        assert issue == other_issue or not overlaps(path, other_path), (issue, path, other_issue, other_path)


#: Parts of the statements a PostgreSQL batch sends for file claims: the read ahead of all
#: its claims, and one claim's own read of its session and probes.
_FILES_READ_AHEAD = "WITH ORDINALITY AS q(ws, sid, n)"
_ONE_CLAIMS_READ = "AS r(lo, hi) CROSS JOIN LATERAL"


async def test_file_claims_of_one_batch_are_read_ahead_and_a_release_before_them_is_seen(
    store: Any, backend: str
) -> None:
    """A PostgreSQL batch whose workspace row exists locks it and reads every claim's
    session and probes in one statement; the claims then send nothing until the batch's
    end. A release earlier in the batch (its rows named by the issue, not by ranges) must
    forget those reads: the claim of the path it frees reads again, and is granted."""
    service, sids = await _sixteen_agents(store, backend)
    seed = await execute(service, {"type": "claim_files", "session_id": sids[0], "issue": "H", "paths": ["seed/x.py"]})
    assert isinstance(seed, Outcome) and seed.status == 200, seed
    with statements_sent() as sent:
        answers = await asyncio.gather(
            execute(service, {"type": "release_files", "session_id": sids[0], "issue": "H"}),
            execute(service, {"type": "claim_files", "session_id": sids[1], "issue": "I-1", "paths": ["seed/x.py"]}),
            *(
                execute(service, {"type": "claim_files", "session_id": s, "issue": f"I-{i}", "paths": [f"own/{i}.py"]})
                for i, s in enumerate(sids[2:], 2)
            ),
        )
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers
    assert sum(_FILES_READ_AHEAD in q for q in sent) == 1, sent
    # Only the claim of the freed path reads for itself (its read ahead was forgotten).
    assert sum(_ONE_CLAIMS_READ in q for q in sent) == 1, sent
    # BEGIN, clock, the lock ahead, the read ahead, the release's reads, the claim's own
    # read, the end statement, COMMIT (and writes a statement could not carry).
    assert len(sent) <= 12, sent
    live = await store.query(
        lambda conn: conn.execute(
            text("SELECT issue, path FROM file_claims WHERE released_us IS NULL ORDER BY position")
        ).all()
    )
    assert live == [("I-1", "seed/x.py"), *((f"I-{i}", f"own/{i}.py") for i in range(2, 16))]


async def test_a_release_in_a_batch_that_holds_the_workspace_lock_hands_the_paths_to_a_waiter(store: Any) -> None:
    """The release reads whether anyone waits for files with its claims (PostgreSQL, once
    an earlier claim of its batch took the workspace's lock) and still hands off."""
    service = Service(store)
    holder, waiter, a, b = [await _register(service, name) for name in ("holder", "waiter", "a", "b")]
    await execute(service, {"type": "claim_files", "session_id": holder, "issue": "H", "paths": ["src/"]})
    refused = await execute(
        service, {"type": "claim_files", "session_id": waiter, "issue": "W", "paths": ["src/x.py"], "wait": True}
    )
    assert isinstance(refused, Outcome) and refused.refusal is not None, refused  # it waits in line
    assert refused.refusal.code == "FILES_CLAIMED", refused
    answers = await asyncio.gather(
        execute(service, {"type": "claim_files", "session_id": a, "issue": "A", "paths": ["a/"]}),
        execute(service, {"type": "claim_files", "session_id": b, "issue": "B", "paths": ["b/"]}),
        execute(service, {"type": "release_files", "session_id": holder, "issue": "H"}),
    )
    assert all(isinstance(x, Outcome) and x.status == 200 for x in answers), answers
    live = await store.query(
        lambda conn: conn.execute(text("SELECT session_id, path FROM file_claims WHERE released_us IS NULL")).all()
    )
    assert sorted(live) == sorted([(a, "a/"), (b, "b/"), (waiter, "src/x.py")])


async def test_claims_and_releases_without_a_session_are_read_ahead_too(store: Any, backend: str) -> None:
    """A claim or release made with a token alone (no session) is read ahead like any
    other on PostgreSQL (its session NULL): granted, then released, in batches of three."""
    service = Service(store)
    seed = await execute(service, {"type": "claim_files", "issue": "S", "paths": ["seed/"]})
    assert isinstance(seed, Outcome) and seed.status == 200, seed  # the workspace's row exists now
    with statements_sent() as sent:
        claimed = await asyncio.gather(
            *(execute(service, {"type": "claim_files", "issue": f"T-{i}", "paths": [f"t/{i}.py"]}) for i in range(3))
        )
        released = await asyncio.gather(
            *(execute(service, {"type": "release_files", "issue": f"T-{i}"}) for i in range(3))
        )
    assert all(isinstance(a, Outcome) and a.status == 200 for a in [*claimed, *released]), (claimed, released)
    assert [json.loads(encoded(a))["result"]["released"] for a in released] == [[f"t/{i}.py"] for i in range(3)]
    if backend == "postgresql":
        assert sum(_FILES_READ_AHEAD in q for q in sent) >= 1 and sum("AS q(ws, sid, key, n)" in q for q in sent) >= 1
    live = await store.query(
        lambda conn: conn.execute(text("SELECT issue FROM file_claims WHERE released_us IS NULL")).all()
    )
    assert live == [("S",)]


async def test_a_wait_that_starts_in_the_batch_is_seen_by_the_releases_read_ahead(store: Any, backend: str) -> None:
    """PostgreSQL reads a batch's releases ahead (their sessions, whether anyone waits for
    files, their claims) once it holds the workspace's lock. A claim earlier in the batch
    that joins the line makes that read stale (nobody waited): the release must still hand
    its paths to the new waiter. (Today the line's own statements, whose rows are not named,
    forget every read ahead; the release's read also names the workspace's line.)"""
    service = Service(store)
    holder, other, waiter = [await _register(service, name) for name in ("holder", "other", "waiter")]
    for sid, issue, path in ((holder, "H", "src/"), (other, "O", "other/")):
        held = await execute(service, {"type": "claim_files", "session_id": sid, "issue": issue, "paths": [path]})
        assert isinstance(held, Outcome) and held.status == 200, held
    with statements_sent() as sent:
        waits, *released = await asyncio.gather(
            execute(
                service,
                {"type": "claim_files", "session_id": waiter, "issue": "W", "paths": ["src/x.py"], "wait": True},
            ),
            execute(service, {"type": "release_files", "session_id": holder, "issue": "H"}),
            execute(service, {"type": "release_files", "session_id": other, "issue": "O"}),
        )
    assert isinstance(waits, Outcome) and waits.refusal is not None and waits.refusal.code == "FILES_CLAIMED", waits
    assert all(isinstance(x, Outcome) and x.status == 200 for x in released), released
    if backend == "postgresql":  # the three in one batch, the releases read ahead
        assert sum("AS q(ws, sid, key, n)" in q for q in sent) == 1, sent
    live = await store.query(
        lambda conn: conn.execute(text("SELECT session_id, path FROM file_claims WHERE released_us IS NULL")).all()
    )
    assert live == [(waiter, "src/x.py")]


@pytest.mark.parametrize("read", ["ahead", "merged"])
async def test_a_claim_counts_a_declarer_revived_earlier_in_its_batch(store: Any, read: str) -> None:
    """A stale session that declared working on an issue, revived earlier in the batch by a
    sign of life (it posted a message), holds that issue for a later claim.

    On PostgreSQL the claim reads without a statement of its own after that sign of life:
    ``ahead``, its row was read with the batch's other claim's before the batch began (its
    declarers with when each was last seen: the sign of life since makes one live);
    ``merged``, its project's guard is held already (locked ahead for an earlier release in
    that project, with no other claim to read ahead with), so it reads its session and its
    project in one statement, which carries the message's writes, the sign of life among
    them, unsent (the declarers count it as live).
    """
    service = Service(store)
    declarer, claimer, other = [await _register(service, name) for name in ("declarer", "claimer", "other")]
    beat = await execute(service, {"type": "heartbeat_agent", "session_id": declarer, "working_on": "X-1"})
    assert isinstance(beat, Outcome) and beat.status == 200, beat
    stale = update(sessions_table).where(sessions_table.c.session_id == declarer).values(last_seen_us=1)
    await store.transact(lambda conn: conn.execute(stale))
    post = {"type": "post_message", "session_id": declarer, "channel": "project:R", "body": "back"}
    if read == "ahead":
        unrelated = {"type": "claim_issue", "session_id": other, "project": "Z", "issue": "Z-1"}
    else:  # a lease of the same project, released in the batch
        held = await execute(service, {"type": "claim_issue", "session_id": other, "project": "X", "issue": "X-0"})
        assert isinstance(held, Outcome) and held.status == 200, held
        unrelated = {"type": "release_issue", "session_id": other, "issue": "X-0"}
    claim_x = {"type": "claim_issue", "session_id": claimer, "project": "X", "issue": "X-1"}
    bodies = [post, claim_x, unrelated] if read == "ahead" else [unrelated, post, claim_x]
    with statements_sent() as sent:
        answers = await asyncio.gather(*(execute(service, b) for b in bodies))
    posted, claim, other_answer = (answers[i] for i in ((0, 1, 2) if read == "ahead" else (1, 2, 0)))
    assert isinstance(posted, Outcome) and posted.status == 200, posted
    assert isinstance(other_answer, Outcome) and other_answer.status == 200, other_answer
    # the declarer is live again: its declaration holds the issue
    assert isinstance(claim, DomainError) and claim.code == "ISSUE_HELD", claim
    assert declarer in json.dumps(claim.details), claim.details
    if store.dialect == "postgresql":  # the path meant was taken
        if read == "ahead":
            assert any("WITH ORDINALITY AS a(ws, project, issue, sid, declaring, n)" in q for q in sent), sent
        else:
            assert any("UPDATE sessions SET last_seen_us" in q and "AS caller" in q for q in sent), sent


async def test_a_claim_read_ahead_is_not_used_once_the_batch_wrote_what_it_read(store: Any) -> None:
    """Two claims of one issue read ahead in one batch: the first is granted, which forgets
    the second's row (it read no lease), so the second reads again and is refused, with no
    pass rolled back (the unique index of unreleased leases is only the backstop)."""
    service = Service(store)
    a, b, c = [await _register(service, name) for name in ("a", "b", "c")]
    rollbacks = stat("batch_rollbacks")
    first, second, elsewhere = await asyncio.gather(
        execute(service, {"type": "claim_issue", "session_id": a, "project": "X", "issue": "X-1"}),
        execute(service, {"type": "claim_issue", "session_id": b, "project": "X", "issue": "X-1"}),
        execute(service, {"type": "claim_issue", "session_id": c, "project": "Y", "issue": "Y-1"}),
    )
    assert isinstance(first, Outcome) and first.status == 200, first
    assert isinstance(second, DomainError) and second.code == "ISSUE_HELD", second
    assert isinstance(elsewhere, Outcome) and elsewhere.status == 200, elsewhere
    assert stat("batch_rollbacks") == rollbacks
    unreleased = await store.query(
        lambda conn: dict(conn.execute(text("SELECT project, unreleased FROM project_leases")).all())
    )
    assert unreleased == {"X": 1, "Y": 1}


async def test_claims_in_many_projects_lock_their_guards_ahead_and_read_in_one_statement_each(
    store: Any, backend: str
) -> None:
    service, sids = await _sixteen_agents(store, backend)
    for round_ in ("new-projects", "guards-exist"):
        with statements_sent() as sent:
            answers = await asyncio.gather(
                *(
                    execute(
                        service, {"type": "claim_issue", "session_id": s, "project": f"P{i}", "issue": f"{round_}-{i}"}
                    )
                    for i, s in enumerate(sids)
                )
            )
        assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers
        # One statement locks every project's guard (inserting the missing ones); then one
        # per claim (its session and its project's reads, the last claim's writes riding
        # on it); the batch's BEGIN, clock, last writes, end and COMMIT (and the first claim
        # may be a batch of its own, of two statements). Was two per claim.
        assert sum("INSERT INTO guards (workspace, key) SELECT" in q for q in sent) == 1, (round_, sent)
        assert len(sent) <= len(sids) + 1 + 5 + 2, (round_, sent)
    unreleased = await store.query(lambda conn: conn.execute(text("SELECT unreleased FROM project_leases")).all())
    assert unreleased == [(2,)] * 16
    leases = await store.query(lambda conn: conn.execute(text("SELECT issue, session_id FROM leases")).all())
    assert len(leases) == 32
    # Releases likewise: one statement locks the guards of their leases' projects, one
    # reads what each reads (its session, the lease locked, whether anyone waits), and one
    # sends their writes. Was three each, then one each.
    with statements_sent() as sent:
        answers = await asyncio.gather(
            *(
                execute(service, {"type": "release_issue", "session_id": s, "issue": f"new-projects-{i}"})
                for i, s in enumerate(sids)
            )
        )
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers
    assert sum("'project:' || l.project" in q for q in sent) == 1, sent
    assert sum("WITH ORDINALITY AS a(ws, issue, sid, n)" in q for q in sent) == 1, sent
    # the guards, the reads, the writes, and BEGIN, the clock, the end and COMMIT (and the
    # first release's batch, when it ran alone: six more)
    assert len(sent) <= 7 + 6, sent
    unreleased = await store.query(lambda conn: conn.execute(text("SELECT unreleased FROM project_leases")).all())
    assert unreleased == [(1,)] * 16


async def test_claims_of_one_project_in_one_batch_count_each_other_on_the_rows_read_ahead(
    store: Any, backend: str
) -> None:
    """A grant adds one to its project's unreleased count: the other claims of that project
    in the batch move the count they read ahead by as much, rather than reading again, and
    the cap holds."""
    service, sids = await _sixteen_agents(store, backend)
    answers, sent = await _claims_in_one_project(service, sids, "One", 10)
    granted = [a for a in answers if isinstance(a, Outcome) and a.status == 200]
    refused = [a for a in answers if isinstance(a, Outcome) and a.refusal is not None]
    assert len(granted) == 10, answers
    assert len(refused) == 6, answers
    assert {str(a.refusal.code) for a in refused if a.refusal is not None} == {"WIP_CAP_REACHED"}, refused
    # The project's guard locked and every claim's rows read ahead once for the batch (the
    # first claim may be a batch of its own), and no claim reads its project again.
    flat = [" ".join(q.split()) for q in sent]
    assert 1 <= sum(q.startswith("SELECT a.n, p.wip_limit") for q in flat) <= 2, flat
    assert not any(q.startswith("WITH lease AS") for q in flat), flat
    assert not any(q.startswith("WITH guard AS") for q in flat), flat
    unreleased = await store.query(
        lambda conn: conn.execute(text("SELECT unreleased FROM project_leases WHERE project = 'One'")).scalar()
    )
    assert unreleased == 10


async def test_a_guard_another_transaction_holds_is_left_to_the_claim_s_own_lock(store: Any, backend: str) -> None:
    """The guards locked ahead skip one another transaction holds: that claim waits for it
    (in a later batch, as the first command, if its short wait runs out), the others don't."""
    if backend != "postgresql":
        pytest.skip("row locks across transactions are PostgreSQL's")
    service = Service(store)
    sids = [await _register(service, f"a{i}") for i in range(4)]
    await execute(service, {"type": "claim_issue", "session_id": sids[2], "project": "P2", "issue": "seed"})
    holder = await asyncpg.connect(store.url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT 1 FROM guards WHERE key = 'project:P2' FOR UPDATE")
        claims = [
            asyncio.ensure_future(
                execute(service, {"type": "claim_issue", "session_id": s, "project": f"P{i}", "issue": f"I-{i}"})
            )
            for i, s in enumerate(sids)
        ]
        done, waiting = await asyncio.wait(claims, timeout=1.0)
        # every claim but the one whose guard is held went through
        assert {claims.index(c) for c in waiting} == {2}, [c.result() for c in done]
        await tx.rollback()
    finally:
        await holder.close()
    answers = await asyncio.gather(*claims)
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers


async def test_a_project_s_cap_holds_under_a_race_with_a_guard_row_only_where_it_locks(store: Any) -> None:
    """Eight agents race for a project whose cap is 3: three are granted on both stores.
    PostgreSQL serialises them on the project's guard row; SQLite's one writer serialises
    every decision already (BEGIN IMMEDIATE in every process), so it writes no guard row."""
    service = Service(store)
    sids = [await _register(service, f"a{i}") for i in range(8)]
    answers = await asyncio.gather(
        *(
            execute(service, {"type": "claim_issue", "session_id": s, "project": "P", "issue": f"P-{i}"})
            for i, s in enumerate(sids)
        )
    )
    granted = [a for a in answers if isinstance(a, Outcome) and a.status == 200]
    assert len(granted) == 3, answers
    assert all(isinstance(a, Outcome) and a.status == 409 for a in answers if a not in granted), answers
    rows = await store.query(lambda conn: conn.execute(select(guards.c.key)).scalars().all())
    assert rows == ([] if store.dialect == "sqlite" else ["project:P"]), rows


async def test_a_writer_gathers_its_next_batch_until_as_many_wait_as_its_last_held(
    store: Any, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eventcoord.store.postgres import gathering
    from eventcoord.store.sqlite import store as sqlite

    service = Service(store)
    sids = []
    for i in range(4):  # one at a time: batches of one, after which nothing is gathered
        registered = await execute(service, {"type": "register_agent", "actor": f"g{i}"})
        assert isinstance(registered, Outcome)
        sids.append(registered.result["session_id"])
    # From now on a wait ends only when enough commands came (or the store closes).
    monkeypatch.setattr(gathering, "GROUP_COMMIT_WINDOW", 30.0)
    monkeypatch.setattr(gathering, "GATHER_MAX", 30.0)
    monkeypatch.setattr(sqlite, "GROUP_COMMIT_WINDOW", 30.0)

    def beat(sid: str) -> Any:
        return asyncio.ensure_future(execute(service, {"type": "heartbeat_agent", "session_id": sid}))

    # Started together, three commands wait before the writer runs: one batch of three.
    first = await asyncio.gather(*(beat(s) for s in sids[:3]))
    assert all(isinstance(o, Outcome) for o in first)
    lone = beat(sids[3])
    await asyncio.sleep(0.5)
    assert not lone.done()  # the writer waits for as many as its last batch held
    more = [beat(sids[0]), beat(sids[1])]
    done = await asyncio.wait_for(asyncio.gather(lone, *more), 10.0)  # three came: at once
    assert all(isinstance(o, Outcome) for o in done)


async def test_a_batch_of_claims_sends_their_writes_in_one_round_trip(store: Any, backend: str) -> None:
    """Claims read ahead together leave their read-model writes for the batch's end. Each
    claim's writes go as one statement, and the claims whose writes have the same
    statements as one ``executemany`` of it: one round trip for all their writes, where one
    ``executemany`` per kind of write took six."""
    service, sids = await _sixteen_agents(store, backend)
    await execute(service, {"type": "claim_issue", "session_id": sids[0], "project": "Old", "issue": "I-old"})
    before = await store.query(
        lambda conn: dict(conn.execute(select(sessions_table.c.session_id, sessions_table.c.last_seen_us)).all())
    )
    with statements_sent() as sent:
        answers = await asyncio.gather(
            *(
                execute(service, {"type": "claim_issue", "session_id": s, "project": f"P{i}", "issue": f"I-{i}"})
                for i, s in enumerate(sids)
            )
        )
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers
    writes = [q for q in sent if "INSERT INTO leases" in q]
    # One, or two where the first claim was a batch of its own (the writer was idle).
    assert 1 <= len(writes) <= 2, sent
    for write in ("INSERT INTO issues", "INSERT INTO project_leases", "UPDATE work_items", "DELETE FROM waits"):
        assert write in writes[-1], (write, writes[-1])  # a claim's six writes, in one statement
    assert "UPDATE sessions SET last_seen_us" in writes[-1]
    # BEGIN, the clock, the guards, the reads, the writes, the end and COMMIT (and the
    # first claim's batch, when it ran alone).
    assert len(sent) <= 7 + 6, sent
    # And what they wrote is every claim's, as one write at a time would have left it.
    leases = await store.query(
        lambda conn: conn.execute(text("SELECT issue, project, session_id, fencing_token FROM leases")).all()
    )
    assert sorted(leases) == sorted(
        [("I-old", "Old", sids[0], 1), *((f"I-{i}", f"P{i}", s, 1) for i, s in enumerate(sids))]
    )
    counts = await store.query(
        lambda conn: dict(conn.execute(text("SELECT project, unreleased FROM project_leases")).all())
    )
    assert counts == {"Old": 1, **{f"P{i}": 1 for i in range(16)}}
    registry = await store.query(
        lambda conn: dict(conn.execute(text("SELECT issue, last_fencing_token FROM issues")).all())
    )
    assert registry == {"I-old": 1, **{f"I-{i}": 1 for i in range(16)}}
    after = await store.query(
        lambda conn: dict(conn.execute(select(sessions_table.c.session_id, sessions_table.c.last_seen_us)).all())
    )
    assert all(after[s] > before[s] for s in sids), (before, after)


async def test_releases_of_one_batch_in_shared_projects_count_every_lease_off(store: Any, backend: str) -> None:
    """Releases read ahead together defer their writes, each naming its project's count
    (``LeaseReleased.project``): a release waits only for the writes of its own project to
    go before its own, and every project's count ends where one release at a time leaves it."""
    service, sids = await _sixteen_agents(store, backend)
    claims = [
        {"type": "claim_issue", "session_id": s, "project": f"P{i % 4}", "issue": f"I-{i}"} for i, s in enumerate(sids)
    ]
    for project in {c["project"] for c in claims}:
        await execute(service, {"type": "configure_project", "project": project, "wip_limit": 10})
    answers = await asyncio.gather(*(execute(service, body) for body in claims))
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers
    with statements_sent() as sent:
        answers = await asyncio.gather(
            *(
                execute(service, {"type": "release_issue", "session_id": s, "issue": f"I-{i}"})
                for i, s in enumerate(sids)
            )
        )
    assert all(isinstance(a, Outcome) and a.status == 200 for a in answers), answers
    # The reads of all 16 in one statement (two batches if the first release ran alone).
    assert 1 <= sum("WITH ORDINALITY AS a(ws, issue, sid, n)" in q for q in sent) <= 2, sent
    # Their writes go four at a time, where the next release is of a project already
    # counted (a write that names no project's row would wait for every one before it).
    assert sum("UPDATE leases SET released_us" in q for q in sent) <= 4 + 2, sent
    counts = await store.query(lambda conn: conn.execute(text("SELECT project, unreleased FROM project_leases")).all())
    assert sorted(counts) == [(f"P{p}", 0) for p in range(4)]
    live = await store.query(
        lambda conn: conn.execute(text("SELECT count(*) FROM leases WHERE released_us IS NULL")).scalar()
    )
    assert live == 0
    events_ = await store.query(
        lambda conn: conn.execute(text("SELECT data FROM events WHERE type = 'LeaseReleased' ORDER BY position")).all()
    )
    assert sorted(json.loads(d)["project"] for (d,) in events_) == sorted(f"P{i % 4}" for i in range(16))
    _, diffs = await check(store)
    assert diffs == []
