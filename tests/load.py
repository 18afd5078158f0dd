"""A bounded mixed load on real servers, and the invariants checked from the event log afterwards.

:class:`Workload` drives N concurrent clients (each its own agent token and session, spread
over the given replicas) for a fixed time, mixing issue claims and releases, exclusive
file claims over overlapping directories and globs, and queue traffic; it remembers every
event an answer acknowledged. :func:`check_log` replays the log and lists every broken
promise: two unreleased leases on one issue, two live exclusive file claims that overlap,
a project over its WIP cap at a grant, a queue transition from the wrong status, an
acknowledged event missing, a gap in the positions. The load runs without stale sessions
(the TTL is far longer than the run), so every unreleased lease is a live one.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
from tests.helpers import BOOTSTRAP

from eventcoord.domain.paths.overlap import overlaps

PATHS = [
    "src/a/",
    "src/a/x.py",
    "src/b/*.py",
    "src/b/y.py",
    "docs/",
    "docs/**/*.md",
    "README.md",
    "src/c/z.py",
    "src/**/test_*.py",
    "src/c/",
    "tools/run.sh",
]
#: Error codes a client of this workload may meet; anything else is a failure.
EXPECTED_CODES = {
    "ISSUE_HELD",
    "WIP_CAP_REACHED",
    "FILES_CLAIMED",
    "NOT_HOLDER",
    "INVALID_TRANSITION",
    "CONCURRENCY",
    "NOT_FOUND",
}


@dataclass
class Tally:
    """What the clients saw."""

    statuses: Counter[int] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    transport_errors: Counter[str] = field(default_factory=Counter)
    acknowledged: set[tuple[int, str]] = field(default_factory=set)
    unexpected: list[str] = field(default_factory=list)
    #: (seconds since start, status) of every answer (fault tests look at what came when).
    timeline: list[tuple[float, int]] = field(default_factory=list)


class Client:
    """One agent: its own token, its own session, on one replica."""

    def __init__(self, work: Workload, n: int, base_url: str, token: str) -> None:
        self.work = work
        self.n = n
        self.http = httpx.AsyncClient(
            base_url=base_url, headers={"authorization": f"Bearer {token}"}, timeout=httpx.Timeout(10.0)
        )
        self.rng = random.Random(n)
        self.session: str | None = None
        self.leases: set[str] = set()
        self.items: list[str] = []
        #: Whether its file claim of ``F-n`` was granted and not yet released: its next turn at
        #: files releases it, so every run that grants a claim also releases one, whoever wins.
        self.holds_files = False

    async def send(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The answer's ``result`` on 200; None otherwise (tallied)."""
        t = self.work.tally
        t.kinds[body["type"]] += 1
        try:
            r = await self.http.post("/v1/commands", json=body)
        except httpx.HTTPError as e:
            t.transport_errors[type(e).__name__] += 1
            await asyncio.sleep(0.05)
            return None
        t.statuses[r.status_code] += 1
        t.timeline.append((time.monotonic() - self.work.started, r.status_code))
        try:
            payload = r.json()
        except ValueError:
            t.unexpected.append(f"{r.status_code} not JSON: {r.text[:200]}")
            return None
        for ref in payload.get("events", []) or []:
            t.acknowledged.add((ref["position"], ref["type"]))
        if r.status_code == 200:
            result: dict[str, Any] = payload.get("result") or {}
            return result
        code = payload.get("error", {}).get("code", "?")
        t.codes[code] += 1
        if r.status_code >= 500:
            if r.status_code == 503 and code == "STORE_UNAVAILABLE":
                await asyncio.sleep(0.05)
            elif code not in self.work.tolerated_5xx:
                t.unexpected.append(f"{r.status_code} {code} on {body['type']}")
        elif code not in EXPECTED_CODES:
            t.unexpected.append(f"{r.status_code} {code} on {body['type']}: {r.text[:200]}")
        return None

    async def register(self) -> None:
        result = await self.send({"type": "register_agent", "actor": f"load-{self.n}"})
        if result is not None:
            self.session = result["session_id"]
            self.leases.clear()
            self.items.clear()
            self.holds_files = False  # the end of its last session released them

    async def step(self) -> None:
        if self.session is None:
            await self.register()
            return
        s, rng = self.session, self.rng
        roll = rng.random()
        if roll < 0.25:
            project = rng.choice(self.work.projects)
            issue = f"{project}-{rng.randint(1, self.work.issues_per_project)}"
            if (
                await self.send({"type": "claim_issue", "session_id": s, "project": project, "issue": issue})
                is not None
            ):
                self.leases.add(issue)
        elif roll < 0.40:
            if self.leases:
                issue = rng.choice(sorted(self.leases))
                self.leases.discard(issue)
                await self.send(
                    {
                        "type": "release_issue",
                        "session_id": s,
                        "issue": issue,
                        "reason": rng.choice(["released", "completed"]),
                    }
                )
        elif roll < 0.55 and not self.holds_files:
            paths = rng.sample(PATHS, rng.randint(1, 3))
            claimed = await self.send({"type": "claim_files", "session_id": s, "issue": f"F-{self.n}", "paths": paths})
            self.holds_files = claimed is not None
        elif roll < 0.65:  # its own claim, or (holding none) a release of nothing
            if await self.send({"type": "release_files", "session_id": s, "issue": f"F-{self.n}"}) is not None:
                self.holds_files = False
        elif roll < 0.75:
            project = rng.choice(self.work.projects)
            body: dict[str, Any] = {"type": "enqueue_work", "project": project, "priority": rng.randint(0, 5)}
            if rng.random() < 0.5:
                body["issue"] = f"{project}-{rng.randint(1, self.work.issues_per_project)}"
            await self.send(body)
        elif roll < 0.88:
            project = rng.choice(self.work.projects)
            got = await self.send({"type": "claim_next_work", "session_id": s, "project": project})
            item = (got or {}).get("item")
            if item:
                if await self.send({"type": "start_work", "session_id": s, "item_id": item["item_id"]}) is not None:
                    outcome = rng.choice(["done", "done", "failed"])
                    await self.send(
                        {"type": "finish_work", "session_id": s, "item_id": item["item_id"], "outcome": outcome}
                    )
                if item.get("issue"):
                    self.leases.discard(item["issue"])
        elif roll < 0.98:
            await self.send({"type": "heartbeat_agent", "session_id": s})
        else:
            if await self.send({"type": "end_agent", "session_id": s}) is not None:
                self.session = None

    async def run(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            await self.step()

    async def close(self) -> None:
        await self.http.aclose()


class Workload:
    """``clients`` agents over ``base_urls`` for ``seconds``; see the module docstring."""

    def __init__(
        self,
        base_urls: list[str],
        clients: int = 54,
        seconds: float = 10.0,
        projects: tuple[str, ...] = ("P", "Q"),
        wip_limits: dict[str, int] | None = None,
        issues_per_project: int = 12,
        tolerated_5xx: frozenset[str] = frozenset(),
    ) -> None:
        self.base_urls = base_urls
        self.n_clients = clients
        self.seconds = seconds
        self.projects = list(projects)
        self.wip_limits = wip_limits or {"P": 3, "Q": 5}
        self.issues_per_project = issues_per_project
        self.tolerated_5xx = tolerated_5xx
        self.tally = Tally()
        self.clients: list[Client] = []
        self.started = time.monotonic()

    async def prepare(self) -> None:
        """Configure the projects and mint one agent token per client (bootstrap token)."""
        async with httpx.AsyncClient(
            base_url=self.base_urls[0], headers={"authorization": f"Bearer {BOOTSTRAP}"}, timeout=30
        ) as admin:
            for project in self.projects:
                r = await admin.post(
                    "/v1/commands",
                    json={
                        "type": "configure_project",
                        "project": project,
                        "wip_limit": self.wip_limits.get(project, 3),
                    },
                )
                assert r.status_code == 200, r.text
            for n in range(self.n_clients):
                r = await admin.post("/v1/commands", json={"type": "issue_token", "role": "agent"})
                assert r.status_code == 200, r.text
                url = self.base_urls[n % len(self.base_urls)]
                self.clients.append(Client(self, n, url, r.json()["result"]["token"]))

    async def run(self) -> Tally:
        """Run every client until the time is up."""
        self.started = time.monotonic()
        deadline = self.started + self.seconds
        try:
            await asyncio.gather(*(c.run(deadline) for c in self.clients))
        finally:
            await asyncio.gather(*(c.close() for c in self.clients))
        return self.tally


def check_log(
    log: list[dict[str, Any]], wip_limits: dict[str, int], acknowledged: set[tuple[int, str]]
) -> tuple[list[str], Counter[str]]:
    """Replay ``log`` (every event, in position order); the broken promises and event counts."""
    broken: list[str] = []
    types: Counter[str] = Counter(e["type"] for e in log)
    positions = [e["position"] for e in log]
    if positions != list(range(1, len(log) + 1)):
        broken.append("positions are not contiguous from 1")
    have = {(e["position"], e["type"]) for e in log}
    lost = sorted(acknowledged - have)
    if lost:
        broken.append(f"{len(lost)} acknowledged events missing from the log, e.g. {lost[:5]}")

    limits = dict(wip_limits)
    lease_of: dict[str, tuple[str, str]] = {}  # issue -> (project, session)
    project_of: dict[str, str] = {}
    fencing: dict[str, int] = {}
    claims: dict[tuple[str, str | None, str], bool] = {}  # (issue, session, path) -> exclusive
    status: dict[str, str] = {}
    for e in log:
        d, t, p = e["data"], e["type"], e["position"]
        if t == "ProjectConfigured":
            limits[d["project"]] = d["wip_limit"]
        elif t == "LeaseGranted":
            issue = d["issue"]
            if issue in lease_of:
                broken.append(f"@{p}: {issue} granted to {d['session_id']} while {lease_of[issue][1]} holds it")
            if d["fencing_token"] <= fencing.get(issue, 0):
                broken.append(f"@{p}: fencing token of {issue} did not increase")
            fencing[issue] = d["fencing_token"]
            lease_of[issue] = (d["project"], d["session_id"])
            project_of[issue] = d["project"]
            held = sum(1 for proj, _ in lease_of.values() if proj == d["project"])
            if held > limits.get(d["project"], 3):
                broken.append(f"@{p}: project {d['project']} has {held} live leases, cap {limits.get(d['project'], 3)}")
        elif t == "LeaseReleased":
            holder = lease_of.pop(d["issue"], None)
            if holder is None or holder[1] != d["session_id"]:
                broken.append(f"@{p}: {d['issue']} released by {d['session_id']}, holder {holder}")
        elif t == "FilesClaimed":
            mine = (d["issue"], d["session_id"])
            for path in d["paths"]:
                if d.get("exclusive", True):
                    for (issue, session, other), exclusive in claims.items():
                        if exclusive and (issue, session) != mine and overlaps(path, other):
                            broken.append(f"@{p}: {path} ({d['issue']}) overlaps live {other} ({issue})")
                claims[(d["issue"], d["session_id"], path)] = d.get("exclusive", True)
        elif t == "FileClaimReleased":
            for path in d["paths"]:
                if claims.pop((d["issue"], d["session_id"], path), None) is None:
                    broken.append(f"@{p}: released {path} of {d['issue']} that was not claimed")
        elif t == "WorkEnqueued":
            status[d["item_id"]] = "queued"
        elif t == "WorkClaimed":
            if status.get(d["item_id"]) != "queued":
                broken.append(f"@{p}: item {d['item_id']} claimed while {status.get(d['item_id'])}")
            status[d["item_id"]] = "claimed"
        elif t == "WorkStarted":
            if status.get(d["item_id"]) != "claimed":
                broken.append(f"@{p}: item {d['item_id']} started while {status.get(d['item_id'])}")
            status[d["item_id"]] = "running"
        elif t == "WorkFinished":
            if status.get(d["item_id"]) not in ("claimed", "running", "queued"):
                broken.append(f"@{p}: item {d['item_id']} finished while {status.get(d['item_id'])}")
            status[d["item_id"]] = d["outcome"]
        elif t == "WorkRequeued":
            status[d["item_id"]] = "queued"
    return broken, types


async def read_log(base_url: str) -> list[dict[str, Any]]:
    """The whole log of workspace ``default``, paged."""
    out: list[dict[str, Any]] = []
    async with httpx.AsyncClient(
        base_url=base_url, headers={"authorization": f"Bearer {BOOTSTRAP}"}, timeout=30
    ) as http:
        while True:
            r = await http.get("/v1/events", params={"after": out[-1]["position"] if out else 0, "limit": 1000})
            assert r.status_code == 200, r.text
            page = r.json()["events"]
            if not page:
                return out
            out.extend(page)


async def rebuild_equals_live(db_url: str) -> None:
    """Rebuild every read model from position 0 into the same tables; assert they come back equal."""
    from sqlalchemy import Connection, select

    from eventcoord import projections
    from eventcoord.projections.tables import READ_MODEL_TABLES
    from eventcoord.store import open_store

    def snapshot(conn: Connection) -> dict[str, list[tuple[Any, ...]]]:
        return {
            t.name: [tuple(row) for row in conn.execute(select(t).order_by(*t.primary_key.columns))]
            for t in READ_MODEL_TABLES
        }

    store = open_store(db_url)
    await store.start()
    try:
        live = await store.query(snapshot)
        head = await store.head()
        assert await store.transact(projections.rebuild, retry=False) == head
        rebuilt = await store.query(snapshot)
        for table in READ_MODEL_TABLES:
            assert rebuilt[table.name] == live[table.name], f"read model {table.name} differs after rebuild"
    finally:
        await store.close()
