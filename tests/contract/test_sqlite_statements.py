"""What a batch of commands sends to SQLite, counted on the writer's own connection.

SQLite's one writer holds the database's write lock from a batch's ``BEGIN IMMEDIATE`` to
its commit, so:

* the position counter and the stream heads are read once and moved in memory, and written
  once before the commit (``store/sqlite/log_heads.py``): no ``UPDATE … RETURNING`` of the counter
  and no upsert ``… RETURNING`` of a stream head per command; a head the writer's last
  batch committed is not read again while nothing else wrote;
* a claim_issue or a release_issue reads what it decides on in one statement, its session
  included: there is no guard to lock first (``lock_guard``), so nothing separates the
  session's read from the rest;
* a file command locks no workspace row (``lock_workspace``).

Each count fails on the code before (checked).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tests.contract.test_group_commit import _register, encoded, execute
from tests.contract.test_queue_pull_reads import statements

from eventcoord.service import Outcome, Service
from eventcoord.store.sqlite import store as sqlite_store

pytestmark = pytest.mark.sqlite


@pytest.fixture(autouse=True)
def _one_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch decided in one time slice, however loaded the machine: these tests count the
    statements of one batch; slicing a long batch is tests/contract/test_batch_slices.py's."""
    monkeypatch.setattr(sqlite_store, "BATCH_SLICE_S", 60.0)


AGENTS = 16


def _reads(sent: list[str]) -> list[str]:
    return [s for s in sent if s.lstrip().upper().startswith(("SELECT", "WITH"))]


async def _batch(store: Any, service: Service, bodies: list[dict[str, Any]]) -> list[str]:
    """The statements of ``bodies`` sent at once (one batch), each answered 200."""
    with statements(store) as sent:
        answers = await asyncio.gather(*(execute(service, b) for b in bodies))
    for answer in answers:
        assert isinstance(answer, Outcome) and answer.status == 200, answer
    assert sum(s.startswith("BEGIN") for s in sent) == 1, "one batch"
    return sent


def _moves_the_log_once(sent: list[str]) -> None:
    """The counter written once, each stream head once, neither read back by RETURNING."""
    assert [s for s in sent if "store_head" in s and not s.startswith("SELECT")] == [
        next(s for s in sent if s.startswith("UPDATE store_head"))
    ]
    assert not any("RETURNING" in s for s in sent if "store_head" in s or "stream_heads" in s)
    assert sum(s.startswith("SELECT store_head.position") for s in sent) == 1


async def test_a_batch_of_claims_and_releases_reads_once_each_and_moves_the_log_once(store: Any) -> None:
    service = Service(store)
    sids = [await _register(service, f"a{i}") for i in range(AGENTS)]
    claims = [
        {"type": "claim_issue", "session_id": sid, "project": f"P{i}", "issue": f"I{i}"} for i, sid in enumerate(sids)
    ]
    sent = await _batch(store, service, claims)
    # Per claim: its reads in one statement, then its stream's head; the counter once.
    assert len(_reads(sent)) == AGENTS + AGENTS + 1
    assert sum(s.startswith("SELECT stream_heads.version") for s in sent) == AGENTS
    _moves_the_log_once(sent)

    releases = [{"type": "release_issue", "session_id": sid, "issue": f"I{i}"} for i, sid in enumerate(sids)]
    sent = await _batch(store, service, releases)
    # Per release its reads in one statement; the heads of the claims' streams are the ones
    # the claims' batch committed (nothing else wrote since): the counter once.
    assert len(_reads(sent)) == AGENTS + 1
    assert not any(s.startswith("SELECT stream_heads.version") for s in sent)
    _moves_the_log_once(sent)

    # What the batch wrote in memory is what a fresh read finds.
    answer = await execute(service, {"type": "claim_issue", "session_id": sids[0], "project": "P0", "issue": "I0"})
    assert isinstance(answer, Outcome) and answer.status == 200
    assert json.loads(encoded(answer))["position"] == await store.head() == 3 * AGENTS + 1


async def test_a_batch_of_file_claims_and_releases_locks_no_workspace_row(store: Any) -> None:
    service = Service(store)
    sids = [await _register(service, f"a{i}") for i in range(AGENTS)]
    claims = [
        {"type": "claim_files", "session_id": sid, "issue": f"F{i}", "paths": [f"w/{i}.py"]}
        for i, sid in enumerate(sids)
    ]
    sent = await _batch(store, service, claims)
    assert not any("workspaces" in s for s in sent)
    _moves_the_log_once(sent)
    releases = [{"type": "release_files", "session_id": sid, "issue": f"F{i}"} for i, sid in enumerate(sids)]
    sent = await _batch(store, service, releases)
    assert not any("workspaces" in s for s in sent)
    _moves_the_log_once(sent)


async def test_a_batch_of_heartbeats_moves_the_log_once(store: Any) -> None:
    service = Service(store)
    sids = [await _register(service, f"a{i}") for i in range(AGENTS)]
    sent = await _batch(store, service, [{"type": "heartbeat_agent", "session_id": sid} for sid in sids])
    # Per heartbeat its session; its stream's head is the one its registration committed,
    # checked still the database's once for the batch; the counter once.
    assert len(_reads(sent)) == AGENTS + 1
    assert sent.count("PRAGMA data_version") == 1
    assert not any(s.startswith("SELECT stream_heads.version") for s in sent)
    _moves_the_log_once(sent)
