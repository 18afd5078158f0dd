"""History (docs/protocol.md#history) over HTTP: the log's filters and ``as_of`` on every point-in-time read."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Api, ServerProcess

from eventcoord.history import snapshots
from eventcoord.store import open_store


async def _day(api: Api) -> tuple[str, int, int]:
    sid = await api.register(actor="alice")
    other = await api.register(actor="bob")
    granted = (await api.command({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "P-1"})).json()[
        "position"
    ]
    await api.ok({"type": "claim_files", "session_id": sid, "issue": "P-1", "paths": ["src/a.py"]})
    await api.error(
        {"type": "claim_files", "session_id": other, "issue": "P-2", "paths": ["src/a.py"]}, 409, "FILES_CLAIMED"
    )
    await api.ok({"type": "enqueue_work", "project": "P", "issue": "P-3"})
    for _ in range(3):
        await api.ok({"type": "heartbeat_agent", "session_id": other})
    await api.ok({"type": "release_issue", "session_id": sid, "issue": "P-1", "reason": "completed"})
    await api.ok({"type": "release_files", "session_id": sid, "issue": "P-1"})
    return sid, granted, await api.head()


async def test_events_filters_never_reorder_and_page_with_after(api: Api) -> None:
    sid, _, _ = await _day(api)
    every = await api.events()
    hb = (await api.get("/v1/events", type="AgentHeartbeat"))["events"]
    assert [e["position"] for e in hb] == [e["position"] for e in every if e["type"] == "AgentHeartbeat"]
    two = (await api.get("/v1/events", type=["LeaseGranted", "LeaseReleased"]))["events"]
    assert [e["type"] for e in two] == ["LeaseGranted", "LeaseReleased"]
    assert [e["position"] for e in two] == sorted(e["position"] for e in two)
    page = (await api.get("/v1/events", type="AgentHeartbeat", after=hb[0]["position"], limit=1))["events"]
    assert [e["position"] for e in page] == [hb[1]["position"]]
    stream = (await api.get("/v1/events", stream=f"session:{sid}"))["events"]
    assert stream and all(e["stream"] == f"session:{sid}" for e in stream)
    assert [e["position"] for e in stream] == [e["position"] for e in every if e["stream"] == f"session:{sid}"]
    for i, e in enumerate(stream):  # paging inside a stream seeks by version
        rest = (await api.get("/v1/events", stream=f"session:{sid}", after=e["position"]))["events"]
        assert rest == stream[i + 1 :]
        between = (await api.get("/v1/events", stream=f"session:{sid}", after=e["position"] - 1, limit=1))["events"]
        assert between == [e]
    # since/until on recorded_at: inclusive / exclusive.
    mid = every[len(every) // 2]
    later = (await api.get("/v1/events", since=mid["recorded_at"]))["events"]
    assert [e["position"] for e in later] == [e["position"] for e in every if e["recorded_at"] >= mid["recorded_at"]]
    earlier = (await api.get("/v1/events", until=mid["recorded_at"]))["events"]
    assert [e["position"] for e in earlier] == [e["position"] for e in every if e["recorded_at"] < mid["recorded_at"]]
    both = (
        await api.get("/v1/events", type="AgentHeartbeat", since=every[0]["recorded_at"], until="2999-01-01T00:00:00Z")
    )["events"]
    assert both == hb
    assert (await api.get("/v1/events", since="2999-01-01T00:00:00Z"))["events"] == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"type": "NoSuchEvent"}, "type"),
        ({"since": "yesterday"}, "since"),
        ({"until": "12:00"}, "until"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
        ({"stream": "x" * 201}, "stream"),
    ],
)
async def test_bad_event_filters_are_validation_naming_the_field(api: Api, params: dict[str, Any], field: str) -> None:
    r = await api.http.get("/v1/events", params=params)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "VALIDATION" and r.json()["error"]["details"]["field"] == field


async def test_every_point_in_time_read_answers_as_of_a_position(api: Api) -> None:
    sid, granted, head = await _day(api)
    moment = {"position": granted}
    leases = await api.get("/v1/leases", as_of=granted)
    assert [le["issue"] for le in leases["leases"]] == ["P-1"] and leases["as_of"]["position"] == granted
    assert leases["as_of"]["at"].endswith("Z")
    assert (await api.get("/v1/leases"))["leases"] == []
    state = await api.get("/v1/issues/P-1/state", as_of=granted)
    assert state["state"] == "held" and state["as_of"]["position"] == granted
    assert (await api.get("/v1/issues/P-1/state"))["state"] == "free"
    agents = await api.get("/v1/agents", as_of=granted)
    assert {a["session_id"] for a in agents["agents"]} >= {sid} and agents["as_of"]["position"] == granted
    claims_then = await api.get("/v1/file-claims", as_of=granted + 1)
    assert [c["path"] for c in claims_then["file_claims"]] == ["src/a.py"]
    assert (await api.get("/v1/file-claims"))["file_claims"] == []
    heat = await api.get("/v1/heatmap", as_of=granted)
    assert heat["buckets"] == [] and heat["as_of"]["position"] == granted
    assert (await api.get("/v1/heatmap", as_of=head))["buckets"] == [{"prefix": "src", "count": 1, "leaf": False}]
    queue = await api.get("/v1/queue", as_of=granted)
    assert queue["items"] == [] and queue["as_of"] == {**moment, "at": queue["as_of"]["at"]}
    assert len((await api.get("/v1/queue", as_of=head))["items"]) == 1
    for path in ("/v1/leases", "/v1/agents", "/v1/file-claims", "/v1/heatmap", "/v1/queue", "/v1/issues/P-1/state"):
        r = await api.http.get(path, params={"as_of": head + 1000})
        assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "as_of", (path, r.text)
        r = await api.http.get(path, params={"as_of": "not-a-time"})
        assert r.status_code == 422, (path, r.text)


async def _log_past_ten_events(api: Api) -> str:
    """A session and 12 heartbeats: past EVENTCOORD_SNAPSHOT_EVERY=10. Its session id."""
    sid = await api.register(actor="snap")
    for _ in range(12):
        await api.ok({"type": "heartbeat_agent", "session_id": sid})
    return sid


async def test_a_serving_replica_snapshots_every_n_events_in_the_background(
    start_server: Callable[..., ServerProcess], db_url: str
) -> None:
    server = start_server(extra_env={"EVENTCOORD_SNAPSHOT_EVERY": "10"})
    api = Api(server.base_url)
    try:
        sid = await _log_past_ten_events(api)
        head = await api.head()

        store = open_store(db_url)
        await store.start()
        try:
            taken: list[int] = []
            for _ in range(300):  # the worker looks every 2 s
                taken.append(await store.query(snapshots.latest_position))
                if taken[-1] >= 10:
                    break
                await asyncio.sleep(0.1)
            assert taken[-1] >= 10, "the server's worker took no snapshot"
        finally:
            await store.close()
        agents = await api.get("/v1/agents", as_of=head)
        assert agents["as_of"]["position"] == head and agents["agents"][0]["session_id"] == sid
    finally:
        await api.close()


def _snapshot_children(pid: int) -> list[int]:
    """The server's child processes running the snapshot worker."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
            if b"eventcoord.history.snapshot_process" in cmdline:
                found.append(int(child))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited: only nobody reaped it yet


async def test_the_snapshot_worker_runs_beside_the_server_and_does_not_outlive_it(
    start_server: Callable[..., ServerProcess],
) -> None:
    """Snapshots are taken in a process of their own (their replay would hold the server's
    GIL); it starts when the first one is due, and exits when its server is killed."""
    server = start_server(extra_env={"EVENTCOORD_SNAPSHOT_EVERY": "10"})
    api = Api(server.base_url)
    try:
        await _log_past_ten_events(api)
        children: list[int] = []
        for _ in range(300):  # the server looks every 2 s
            children = _snapshot_children(server.proc.pid)
            if children:
                break
            await asyncio.sleep(0.1)
        assert len(children) == 1, "the server started no snapshot worker process"
        server.kill()  # no chance to stop its child
        for _ in range(100):
            if not _alive(children[0]):
                break
            await asyncio.sleep(0.1)
        assert not _alive(children[0]), "the snapshot worker outlived its server"
    finally:
        await api.close()
