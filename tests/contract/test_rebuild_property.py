"""Property: after any sequence of commands, a rebuild equals the live read models
(docs/protocol.md#history), on both backends.

Hypothesis draws command sequences over a small world (three agents and a person, a few
issues, paths and queue items) so that they collide often: holds, conflicts, forces,
reclaims, ends, queue moves. Each example runs in a fresh workspace of one store, through
the real pipeline; then ``rebuild --check``'s comparison (scratch rebuilt from the log vs
the live tables) must find nothing, and a real in-place rebuild must change nothing.
Bounded: a fixed number of examples of at most 40 commands.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventcoord import projections
from eventcoord.codec import decode_command
from eventcoord.context import Caller
from eventcoord.errors import DomainError
from eventcoord.history.check import check, read_rows
from eventcoord.projections.tables import READ_MODEL_TABLES
from eventcoord.service import Service
from eventcoord.store import open_store

ISSUES = ["A-1", "A-2", "B-1"]
PATHS = ["src/", "src/a.py", "src/b/**", "docs/x.md"]
KINDS = [
    "claim_issue", "release_issue", "force_issue", "claim_files", "share_files", "force_files",
    "release_files", "heartbeat", "end", "enqueue", "pull", "start", "finish", "acquire", "release_lease",
    "post", "configure",
]  # fmt: skip

op = st.tuples(st.sampled_from(KINDS), st.integers(0, 3), st.integers(0, 2), st.integers(0, 3))
_workspaces = itertools.count()


async def run_sequence(url: str, ops: list[tuple[str, int, int, int]]) -> None:
    store = open_store(url)
    await store.start()
    await store.migrate()
    try:
        ws = f"prop{next(_workspaces)}"
        caller = Caller(ws, "admin")
        service = Service(store)

        async def send(body: dict[str, Any]) -> dict[str, Any] | None:
            try:
                outcome = await service.execute(caller, decode_command(json.dumps(body).encode()))
            except DomainError:
                return None
            return outcome.result if outcome.refusal is None else None

        sids = []
        for i in range(4):
            r = await send({"type": "register_agent", "actor": f"a{i}", "kind": "human" if i == 3 else "agent"})
            assert r is not None
            sids.append(r["session_id"])
        items: list[str] = []
        for kind, who, n, p in ops:
            sid, issue, path = sids[who], ISSUES[n], PATHS[p]
            body: dict[str, Any] | None = {
                "claim_issue": {"type": "claim_issue", "session_id": sid, "project": issue[0], "issue": issue},
                "release_issue": {"type": "release_issue", "session_id": sid, "issue": issue},
                "force_issue": {
                    "type": "claim_issue",
                    "session_id": sid,
                    "project": issue[0],
                    "issue": issue,
                    "force": True,
                },
                "claim_files": {"type": "claim_files", "session_id": sid, "issue": issue, "paths": [path]},
                "share_files": {
                    "type": "claim_files",
                    "session_id": sid,
                    "issue": issue,
                    "paths": [path],
                    "exclusive": False,
                },
                "force_files": {
                    "type": "claim_files",
                    "session_id": sid,
                    "issue": issue,
                    "paths": [path],
                    "force": True,
                },
                "release_files": {"type": "release_files", "session_id": sid, "issue": issue},
                "heartbeat": {"type": "heartbeat_agent", "session_id": sid, "working_on": issue},
                "end": {"type": "end_agent", "session_id": sid, "handoff_note": "bye"},
                "enqueue": {
                    "type": "enqueue_work",
                    "project": issue[0],
                    "issue": issue,
                    "priority": p,
                    "paths": [path],
                },
                "pull": {"type": "claim_next_work", "session_id": sid, "project": issue[0]},
                "acquire": {"type": "acquire_lease", "session_id": sid, "name": f"lock-{n}", "ttl_seconds": 60},
                "release_lease": {"type": "release_lease", "session_id": sid, "name": f"lock-{n}"},
                "post": {"type": "post_message", "session_id": sid, "channel": f"c{n}", "body": path},
                "configure": {"type": "configure_project", "project": issue[0], "wip_limit": p + 1},
            }.get(kind)
            if kind in ("start", "finish"):
                body = None
                if items:
                    item = items[n % len(items)]
                    body = {"type": f"{kind}_work", "session_id": sid, "item_id": item}
                    if kind == "finish":
                        body["outcome"] = "done" if p % 2 else "failed"
            if body is None:
                continue
            result = await send(body)
            if kind == "enqueue" and result:
                items.append(result["item_id"])

        _, diffs = await check(store)
        assert diffs == [], diffs[:5]
        live = await store.query(lambda c: read_rows(c, READ_MODEL_TABLES))
        await store.transact(projections.rebuild, retry=False)
        assert await store.query(lambda c: read_rows(c, READ_MODEL_TABLES)) == live
    finally:
        await store.close()


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(ops=st.lists(op, min_size=1, max_size=40))
def test_rebuild_equals_live_after_any_command_sequence(db_url: str, ops: list[tuple[str, int, int, int]]) -> None:
    asyncio.run(run_sequence(db_url, ops))
