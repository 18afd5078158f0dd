"""The read layer's loaders, plain and read ahead: the same states, the same events.

Every command type with a read-ahead spec (``store/postgres/ahead/table.READS_AHEAD``)
runs on PostgreSQL twice, from the same start, in batches of several: once through the
plain loaders (no substitute installed), once through the substitutes the PostgreSQL store
registers (``store/loaders.py``), which build their state from what the batch read ahead.
The states each command's loaders returned, and the events appended, must be equal. Ids,
positions and the database clock are the same in both runs (ids made from the command
ids, the database emptied between the runs, the test clock pinned).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import msgspec
import pytest
from sqlalchemy import Connection, text
from tests.contract.test_group_commit import encoded, stat

from eventcoord import commands as c
from eventcoord import service as service_module
from eventcoord.codec import decode_command
from eventcoord.context import Caller, Context
from eventcoord.errors import DomainError
from eventcoord.handlers import HANDLERS
from eventcoord.service import Outcome, Service
from eventcoord.store import dbclock
from eventcoord.store.loaders import SUBSTITUTES
from eventcoord.store.postgres import writer
from eventcoord.store.postgres.ahead.table import READS_AHEAD

pytestmark = pytest.mark.postgres

#: The moment the database clock stands at in both runs.
PINNED_US = 1_900_000_000_000_000


def _plain(value: Any) -> Any:
    """A loader's state as plain data, to compare and to show."""
    if isinstance(value, msgspec.Struct):
        return {f: _plain(getattr(value, f)) for f in value.__struct_fields__}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)) or type(value).__name__ == "Record":
        items = [_plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    return value


class Run:
    """One run of a scenario in a workspace: the commands' answers and the states
    their loaders returned (the last attempt's, by command id)."""

    def __init__(self, service: Service, workspace: str) -> None:
        self.service = service
        self.caller = Caller(workspace, "admin", operator=True)
        self.workspace = workspace
        self.states: dict[str, list[tuple[str, Any]]] = {}
        #: The type of each command sent, by its command id.
        self.kinds: dict[str, str] = {}
        self._ids = itertools.count(1)

    async def send(self, body: dict[str, Any]) -> Any:
        """Decide ``body`` (a command id of its own, the same in both runs); its result."""
        body = {**body, "command_id": f"cmd-{next(self._ids)}"}
        self.kinds[body["command_id"]] = body["type"]
        try:
            answer: Outcome | DomainError = await self.service.execute(
                self.caller, decode_command(json.dumps(body).encode())
            )
        except DomainError as e:
            answer = e
        if isinstance(answer, DomainError):
            return {"refused": str(answer.code)}
        return json.loads(encoded(answer)).get("result")

    async def together(self, bodies: list[dict[str, Any]]) -> list[Any]:
        """Send ``bodies`` at once, in this order: a batch decides them in turn."""
        return list(await asyncio.gather(*(self.send(b) for b in bodies)))


def _context(*args: Any, **kwargs: Any) -> Context:
    """The service's Context, making ids from its command id: the same in both runs, however
    often a batch decides the command."""
    ctx = Context(*args, **kwargs)
    made = itertools.count(1)

    def make_id(prefix: str) -> str:
        return f"{prefix}-" + hashlib.sha256(f"{ctx.command_id}/{next(made)}".encode()).hexdigest()[:32]

    ctx.make_id = make_id
    return ctx


def _emptied(conn: Connection) -> None:
    """The database as migrated (the settings kept: the pinned clock too), for the next run:
    the same positions, the same ids."""
    tables = conn.execute(
        text(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            " AND tablename NOT IN ('alembic_version', 'settings', 'store_head')"
        )
    ).scalars()
    conn.execute(text("TRUNCATE " + ", ".join(f'"{t}"' for t in tables)))
    conn.execute(text("UPDATE store_head SET position = 0"))


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Run, bool], None]]:
    """Switches a run to the plain loaders or to the substitutes, recording what they return."""
    running: list[Run] = []
    depth = [0]

    def record(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, recording the state it returns to its handler. A loader may load through
        others on one path and not on the other: only what the handler gets is compared."""

        def loader(conn: Any, *args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            try:
                state = fn(conn, *args, **kwargs)
            finally:
                depth[0] -= 1
            ctx = next((a for a in args if isinstance(a, Context)), None)
            if depth[0] == 0 and ctx is not None and ctx.command_id is not None and running:
                running[-1].states.setdefault(ctx.command_id, []).append((name, _plain(state)))
            return state

        return loader

    def use(run: Run, ahead: bool) -> None:
        running.append(run)
        table = {
            plain: record(plain.__qualname__, substitute if ahead else plain)
            for plain, substitute in SUBSTITUTES.items()
        }
        monkeypatch.setattr(writer, "SUBSTITUTES", table)
        monkeypatch.setattr(service_module, "Context", _context)

    # A command decided again (a careful pass after a rolled-back fast pass) records afresh.
    for kind, handler in list(HANDLERS.items()):

        def again(conn: Any, ctx: Context, cmd: Any, handler: Any = handler) -> Any:
            if running and ctx.command_id is not None:
                running[-1].states.pop(ctx.command_id, None)
            return handler(conn, ctx, cmd)

        monkeypatch.setitem(HANDLERS, kind, again)
    yield use


#: A scenario: what is set up (one command at a time), then the commands under test, sent
#: together so that a batch reads ahead for several of them.
Scenario = Callable[[Run], Awaitable[None]]


async def _agents(run: Run, n: int) -> list[str]:
    return [str((await run.send({"type": "register_agent", "actor": f"agent-{i}"}))["session_id"]) for i in range(n)]


async def _heartbeats_and_ends(run: Run) -> None:
    sids = await _agents(run, 6)
    await run.together([{"type": "heartbeat_agent", "session_id": s, "working_on": "P-1"} for s in sids])
    await run.together([{"type": "end_agent", "session_id": s} for s in sids[:3]])


async def _issue_claims_and_releases(run: Run) -> None:
    sids = await _agents(run, 6)
    await run.send({"type": "configure_project", "project": "P", "wip_limit": 3})
    await run.send({"type": "configure_project", "project": "Q", "wip_limit": 10})
    claims = [
        {"type": "claim_issue", "session_id": sids[i], "project": "P", "issue": f"P-{i}"} for i in range(4)
    ]  # the fourth is over the WIP cap
    claims += [
        {"type": "claim_issue", "session_id": sids[4], "project": "Q", "issue": "Q-1"},
        {"type": "claim_issue", "session_id": sids[5], "project": "Q", "issue": "Q-1", "wait": True},  # held
    ]
    await run.together(claims)
    await run.together(
        [
            {"type": "release_issue", "session_id": sids[0], "issue": "P-0"},
            {"type": "release_issue", "session_id": sids[1], "issue": "P-1", "reason": "completed"},
            {"type": "release_issue", "session_id": sids[4], "issue": "Q-1"},  # hands it to the waiter
            {"type": "release_issue", "session_id": sids[3], "issue": "P-3"},  # never held
        ]
    )


async def _file_claims_and_releases(run: Run) -> None:
    sids = await _agents(run, 5)
    await run.together(
        [
            {"type": "claim_files", "session_id": sids[0], "issue": "F-1", "paths": ["src/a/**"]},
            {"type": "claim_files", "session_id": sids[1], "issue": "F-2", "paths": ["src/b/x.py", "docs/*.md"]},
            {"type": "claim_files", "session_id": sids[2], "issue": "F-3", "paths": ["src/a/one.py"]},  # overlaps F-1
            {"type": "claim_files", "session_id": sids[3], "issue": "F-4", "paths": ["src/a/two.py"], "wait": True},
            {"type": "claim_files", "session_id": sids[4], "issue": "F-5", "paths": ["tests/**"], "exclusive": False},
        ]
    )
    await run.together(
        [
            {"type": "release_files", "session_id": sids[0], "issue": "F-1"},  # the waiter's turn
            {"type": "release_files", "session_id": sids[1], "issue": "F-2", "paths": ["docs/*.md"]},
            {"type": "release_files", "session_id": sids[4], "issue": "F-5"},
            {"type": "release_files", "session_id": sids[2], "issue": "F-3"},  # holds nothing
        ]
    )


async def _queue_pulls_and_transitions(run: Run) -> None:
    sids = await _agents(run, 6)
    items: dict[str, list[str]] = {"W": [], "V": []}
    for project, priority in [("W", 1), ("W", 5), ("W", 3), ("V", 0), ("V", 2)]:
        answer = await run.send({"type": "enqueue_work", "project": project, "priority": priority})
        items[project].append(str(answer["item_id"]))
    pulled = await run.together(
        [{"type": "claim_next_work", "session_id": s, "project": "W" if i < 4 else "V"} for i, s in enumerate(sids)]
    )
    taken = [(s, p["item"]["item_id"]) for s, p in zip(sids, pulled, strict=True) if p and p.get("item")]
    assert len(taken) == 5, pulled  # the fourth pull of W finds nothing left
    await run.together([{"type": "start_work", "session_id": s, "item_id": item} for s, item in taken])
    outcomes = ["done", "failed", "cancelled", "done", "oom_killed"]
    await run.together(
        [
            {"type": "finish_work", "session_id": s, "item_id": item, "outcome": o}
            for (s, item), o in zip(taken, outcomes, strict=True)
        ]
        + [{"type": "finish_work", "session_id": taken[0][0], "item_id": taken[0][1]}]  # finished already
    )


#: Each scenario, the command types whose read-ahead spec it runs (in batches of several),
#: and whether they read rows ahead (``rows_ahead``; sessions rows are read by ``session_rows``).
SCENARIOS: dict[str, tuple[Scenario, tuple[type[c.Command], ...], bool]] = {
    "sessions": (_heartbeats_and_ends, (c.HeartbeatAgent, c.EndAgent), False),
    "issues": (_issue_claims_and_releases, (c.ClaimIssue, c.ReleaseIssue), True),
    "files": (_file_claims_and_releases, (c.ClaimFiles, c.ReleaseFiles), True),
    "queue": (_queue_pulls_and_transitions, (c.ClaimNextWork, c.StartWork, c.FinishWork), True),
}


def test_every_command_read_ahead_has_a_scenario() -> None:
    covered = {kind for _, kinds, _ in SCENARIOS.values() for kind in kinds}
    assert set(READS_AHEAD) == covered


async def _events(store: Any) -> list[tuple[int, str, int, str, Any]]:
    wire = await store.read(after=0, limit=10_000)
    return [(e.position, e.stream, e.version, e.type, msgspec.json.decode(e.data)) for e in wire]


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_plain_and_read_ahead_loaders_give_equal_states_and_events(
    store: Any, recorded: Callable[[Run, bool], None], name: str
) -> None:
    dbclock.enable_test_clock()  # off again after the test (conftest)
    await store.transact(lambda conn: dbclock.pin(conn, PINNED_US))
    scenario, kinds, rows_ahead = SCENARIOS[name]
    service = Service(store)
    plain, ahead = Run(service, "ws"), Run(service, "ws")
    recorded(plain, False)
    await scenario(plain)
    events = await _events(store)
    await store.transact(_emptied)
    read_before, served_before = stat("reads_ahead"), stat("reads_ahead_served")
    recorded(ahead, True)
    await scenario(ahead)
    read, served = stat("reads_ahead") - read_before, stat("reads_ahead_served") - served_before
    assert await _events(store) == events
    assert plain.kinds == ahead.kinds
    for command_id, kind in plain.kinds.items():
        assert plain.states.get(command_id, []) == ahead.states.get(command_id, []), (command_id, kind)
    # The batches read ahead, and every command type under test loads through a substitute.
    if rows_ahead:
        assert read > 0 and served > 0, (read, served)
    tag = {k: str(k.__struct_config__.tag) for k in kinds}
    substituted = {ahead.kinds[command_id] for command_id, states in ahead.states.items() if states}
    missing = sorted(t for t in tag.values() if t not in substituted)
    assert missing == [], f"no loader of {missing} has a substitute registered (store/postgres/ahead/)"
