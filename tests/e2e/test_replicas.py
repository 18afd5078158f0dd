"""Three ``eventcoord serve`` replicas on one PostgreSQL: the database decides every race.

Each replica group-commits the commands it receives, so the races below are decided both
inside one replica's batch and across replicas' batches. Whatever the interleaving: one
winner per race, the WIP cap and file overlap hold across replicas, positions are
contiguous, and no answered command is lost (every event an answer names is in the log,
and the log holds nothing no answer named).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from tests.helpers import Api, ServerProcess


async def test_three_replicas_race_on_one_postgres(backend: str, start_server: Callable[..., ServerProcess]) -> None:
    if backend != "postgresql":
        pytest.skip("replicas share one database only on PostgreSQL")
    servers = [start_server() for _ in range(3)]
    clients = [Api(s.base_url) for s in servers]
    answers: list[httpx.Response] = []

    async def send(i: int, body: dict[str, Any]) -> httpx.Response:
        r = await clients[i % 3].command(body)
        answers.append(r)
        return r

    try:
        r = await send(0, {"type": "configure_project", "project": "P", "wip_limit": 3})
        assert r.status_code == 200, r.text
        registered = await asyncio.gather(
            *(send(i, {"type": "register_agent", "actor": f"agent-{i}"}) for i in range(36))
        )
        sessions = [r.json()["result"]["session_id"] for r in registered]

        # One issue, 36 claimants on three replicas, while every session heartbeats elsewhere.
        claims = [
            send(i + 1, {"type": "claim_issue", "session_id": s, "project": "P", "issue": "HOT"})
            for i, s in enumerate(sessions)
        ]
        beats = [
            send(i + 2, {"type": "heartbeat_agent", "session_id": s, "working_on": f"W-{i}"})
            for i, s in enumerate(sessions)
        ]
        race = await asyncio.gather(*claims, *beats)
        won = [r for r in race[:36] if r.status_code == 200]
        assert len(won) == 1
        assert {r.json()["error"]["code"] for r in race[:36] if r.status_code != 200} == {"ISSUE_HELD"}
        assert all(r.status_code == 200 for r in race[36:])

        # The cap across replicas: HOT holds one of three slots; two more are granted.
        cap = await asyncio.gather(
            *(
                send(i, {"type": "claim_issue", "session_id": s, "project": "P", "issue": f"P-{i}"})
                for i, s in enumerate(sessions[:18])
            )
        )
        assert sum(r.status_code == 200 for r in cap) == 2
        assert {r.json()["error"]["code"] for r in cap if r.status_code != 200} <= {"WIP_CAP_REACHED", "ISSUE_HELD"}
        assert len((await clients[1].get("/v1/leases", project="P"))["leases"]) == 3

        # Overlapping exclusive file claims across replicas: one winner, conflicts recorded.
        files = await asyncio.gather(
            *(
                send(i, {"type": "claim_files", "session_id": s, "issue": f"F-{i}", "paths": ["src/shared/"]})
                for i, s in enumerate(sessions[:18])
            )
        )
        assert sum(r.status_code == 200 for r in files) == 1
        assert {r.json()["error"]["code"] for r in files if r.status_code != 200} == {"FILES_CLAIMED"}

        # One log, served the same by every replica: contiguous, and exactly what was answered.
        logs = [await c.events() for c in clients]
        assert logs[0] == logs[1] == logs[2]
        log = logs[0]
        assert [e["position"] for e in log] == list(range(1, len(log) + 1))
        named = [(ref["position"], ref["type"]) for r in answers for ref in r.json().get("events", [])]
        assert sorted(named) == [(e["position"], e["type"]) for e in log]
        assert sum(e["type"] == "LeaseGranted" for e in log) == 3
        assert sum(e["type"] == "ClaimConflict" for e in log) == 17
    finally:
        await asyncio.gather(*(c.close() for c in clients))
