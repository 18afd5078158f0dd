"""The foundation end to end: a real ``eventcoord serve`` over HTTP, both backends.

Sessions and identity, liveness with a short TTL, the paged event log, idempotency, the
error envelope for any input, auth and workspace scoping, the OpenAPI schema, and many
concurrent clients.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers import BOOTSTRAP, Api, ServerProcess, advance_clock

from eventcoord.commands import COMMAND_TYPES
from eventcoord.errors import ErrorCode

ERROR_STATUS = {code.value: code.status for code in ErrorCode}
RAW_RUNTIME_ID = "runtime-thread-4c1f9e27-do-not-store"


# --- helpers ----------------------------------------------------------------------------


def assert_envelope(r: httpx.Response) -> dict[str, Any]:
    """Any answer is JSON: ``ok: true`` with 200, or the error envelope with a stable code."""
    assert r.status_code < 500, r.text
    assert r.headers["content-type"].startswith("application/json"), r.text
    body: dict[str, Any] = r.json()
    if r.status_code == 200:
        assert body["ok"] is True, r.text
        return body
    assert body["ok"] is False, r.text
    err = body["error"]
    assert err["code"] in ERROR_STATUS, r.text
    assert ERROR_STATUS[err["code"]] == r.status_code, r.text
    assert isinstance(err["message"], str) and "Traceback" not in err["message"]
    assert isinstance(err["details"], dict)
    return body


# --- health, schema ---------------------------------------------------------------------


def test_health_answers_without_auth(server: ServerProcess) -> None:
    r = httpx.get(server.base_url + "/health")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


def test_openapi_lists_the_routes_with_operation_ids(server: ServerProcess) -> None:
    r = httpx.get(server.base_url + "/schema/openapi.json")
    assert r.status_code == 200
    paths = r.json()["paths"]
    ops = {(path, method): op.get("operationId") for path, methods in paths.items() for method, op in methods.items()}
    assert ops[("/v1/commands", "post")] == "postCommand"
    assert ops[("/v1/events", "get")] == "listEvents"
    assert ops[("/v1/agents", "get")] == "listAgents"
    assert ops[("/health", "get")] == "health"
    missing = [key for key, op_id in ops.items() if not op_id]
    assert not missing, f"routes without an operation id: {missing}"
    assert len(set(ops.values())) == len(ops), "operation ids must be unique"


# --- register_agent: identity -------------------------------------------------------------


async def test_register_resolves_every_identity_source_and_records_the_host(api: Api) -> None:
    explicit = await api.ok({"type": "register_agent", "actor": "alice", "host": "ws-1"})
    runtime = await api.ok(
        {"type": "register_agent", "runtime": "claude-code", "runtime_session_id": RAW_RUNTIME_ID, "host": "laptop"}
    )
    ancestry = await api.ok({"type": "register_agent", "process_ancestry": "a1b2c3d4e5f6", "host": "ci-7"})
    unresolved = await api.ok({"type": "register_agent", "host": "box"})

    digest = hashlib.sha256(("eventcoord:" + RAW_RUNTIME_ID).encode()).hexdigest()[:24]
    expected = {
        explicit["session_id"]: ("alice", "explicit-override", True, "ws-1"),
        runtime["session_id"]: (
            f"claude-code:thread-{digest}:laptop",
            "runtime-session-id:claude-code",
            True,
            "laptop",
        ),
        ancestry["session_id"]: ("process-ancestry:anc-a1b2c3d4e5f6:ci-7", "process-ancestry", False, "ci-7"),
        unresolved["session_id"]: (f"unresolved:{unresolved['session_id']}", "unresolved", False, "box"),
    }
    for result in (explicit, runtime, ancestry, unresolved):
        key, source, stable, _ = expected[result["session_id"]]
        assert (result["actor_key"], result["identity_source"], result["stable"]) == (key, source, stable)
        assert result["ttl_seconds"] == 120

    events = await api.events()
    assert [e["type"] for e in events] == ["AgentRegistered"] * 4
    for e in events:
        key, source, stable, host = expected[e["data"]["session_id"]]
        assert e["data"]["actor_key"] == key
        assert e["data"]["identity_source"] == source
        assert e["data"]["stable"] is stable
        assert e["data"]["host"] == host
        assert e["stream"] == f"session:{e['data']['session_id']}" and e["version"] == 1
        assert e["metadata"]["workspace"] == "default"
        assert e["metadata"]["session_id"] == e["data"]["session_id"]
        assert e["metadata"]["actor_key"] == key

    listed = await api.agents()
    for sid, (key, source, stable, host) in expected.items():
        a = listed[sid]
        assert (a["actor_key"], a["identity_source"], a["stable"], a["host"], a["live"], a["kind"]) == (
            key,
            source,
            stable,
            host,
            True,
            "agent",
        )
    # The raw runtime session id is never stored: not in the log, not in any read.
    for path in ("/v1/events", "/v1/agents"):
        r = await api.http.get(path, params={"limit": 1000})
        assert RAW_RUNTIME_ID not in r.text


async def test_untrusted_identity_text_is_sanitised_in_the_event(api: Api) -> None:
    # An actor is never cut (too long is refused: two long names must not become one).
    sid = await api.register(actor="mal\x1b[2Jlory\x00\x9b\u202e" + "x" * 40, host="h\x07ost\x7f" + "y" * 100)
    [event] = [e for e in await api.events() if e["data"]["session_id"] == sid]
    assert event["data"]["actor_key"] == "mal[2Jlory" + "x" * 40
    assert event["data"]["host"] == ("host" + "y" * 100)[:64]


async def test_human_kind_needs_a_human_or_admin_token(api: Api, server: ServerProcess) -> None:
    agent = await api.client("agent")
    human = await api.client("human")
    try:
        before = await api.head()
        err = await agent.error({"type": "register_agent", "actor": "x", "kind": "human"}, 403, "FORBIDDEN")
        assert err["message"]
        assert await api.head() == before  # a refusal writes nothing
        assert (await agent.ok({"type": "register_agent", "actor": "x"}))["session_id"]
        h = await human.register(actor="hannah", kind="human")
        a = await api.register(actor="root", kind="human")
        listed = await api.agents()
        assert listed[h]["kind"] == listed[a]["kind"] == "human"
    finally:
        await agent.close()
        await human.close()


# --- heartbeat_agent, end_agent -----------------------------------------------------------


async def test_heartbeat_keeps_declares_or_clears_working_on(api: Api) -> None:
    sid = await api.register(actor="w", working_on="ISS-1")
    assert (await api.agents())[sid]["working_on"] == "ISS-1"
    hb = await api.ok({"type": "heartbeat_agent", "session_id": sid})
    assert hb["last_heartbeat_at"].endswith("Z")
    assert (await api.agents())[sid]["working_on"] == "ISS-1"  # absent keeps it
    await api.ok({"type": "heartbeat_agent", "session_id": sid, "working_on": "ISS-2"})
    assert (await api.agents())[sid]["working_on"] == "ISS-2"
    await api.ok({"type": "heartbeat_agent", "session_id": sid, "working_on": None})
    assert (await api.agents())[sid]["working_on"] is None  # null clears it
    await api.ok({"type": "heartbeat_agent", "session_id": sid})
    assert (await api.agents())[sid]["working_on"] is None
    beats = [e for e in await api.events() if e["type"] == "AgentHeartbeat"]
    assert [e["data"].get("working_on", "absent") for e in beats] == ["absent", "ISS-2", None, "absent"]
    assert [e["version"] for e in beats] == [2, 3, 4, 5]
    listed = (await api.agents())[sid]
    assert listed["last_heartbeat_at"] >= listed["registered_at"]


async def test_heartbeat_with_a_handoff_note_records_it_on_the_declared_issue(api: Api) -> None:
    sid = await api.register(actor="n")
    r = await api.command(
        {
            "type": "heartbeat_agent",
            "session_id": sid,
            "working_on": "ISS-7",
            "handoff_note": "step 3 of 5\n\tnext: tests\x00\x1b",
        }
    )
    assert r.status_code == 200, r.text
    assert [e["type"] for e in r.json()["events"]] == ["AgentHeartbeat", "HandoffNoted"]
    noted = [e for e in await api.events() if e["type"] == "HandoffNoted"]
    assert [(e["stream"], e["data"]) for e in noted] == [
        ("issue:ISS-7", {"issue": "ISS-7", "session_id": sid, "note": "step 3 of 5\n\tnext: tests"})
    ]


async def test_end_agent_then_the_session_can_do_nothing_more(api: Api) -> None:
    sid = await api.register(actor="e")
    ended = await api.ok({"type": "end_agent", "session_id": sid, "handoff_note": "bye\n"})
    assert ended["released_leases"] == [] and ended["released_claims"] == []
    last = (await api.events())[-1]
    assert last["type"] == "AgentEnded" and last["data"] == {"session_id": sid, "handoff_note": "bye\n"}
    a = (await api.agents())[sid]
    assert a["live"] is False and a["ended_at"] is not None
    assert sid not in await api.agents(live="true")
    assert sid in await api.agents(live="false")
    before = await api.head()
    for body in (
        {"type": "heartbeat_agent", "session_id": sid},
        {"type": "heartbeat_agent", "session_id": sid, "working_on": "X-1"},
        {"type": "end_agent", "session_id": sid},
        {"type": "claim_issue", "session_id": sid, "project": "P", "issue": "P-1"},
        {"type": "claim_files", "session_id": sid, "issue": "P-1", "paths": ["src/"]},
        {"type": "release_files", "session_id": sid, "issue": "P-1"},
        {"type": "post_message", "session_id": sid, "channel": "issue:P-1", "body": "still here?"},
        {"type": "verify_hold", "session_id": sid, "issue": "P-1"},
        {"type": "claim_next_work", "session_id": sid, "project": "P"},
        {"type": "acquire_lease", "session_id": sid, "name": "dispatcher"},
        {"type": "renew_lease", "session_id": sid, "name": "dispatcher"},
        {"type": "release_lease", "session_id": sid, "name": "dispatcher"},
    ):
        err = await api.error(body, 409, "SESSION_NOT_LIVE")
        assert err["details"]["session_id"] == sid
    assert await api.head() == before


async def test_an_ended_session_may_not_release_either(api: Api) -> None:
    sid = await api.register(actor="r")
    await api.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "P-1"})
    await api.ok({"type": "end_agent", "session_id": sid})
    await api.error({"type": "release_issue", "session_id": sid, "issue": "P-1"}, 409, "SESSION_NOT_LIVE")


async def test_a_command_s_answer_carries_its_type_length_and_status(api: Api) -> None:
    """POST /v1/commands sends its answer as a bare ASGI response (``api.answers.CommandAnswer``):
    a success and a recorded refusal each arrive whole, typed JSON, with their status."""
    holder, other = await api.register(actor="holder"), await api.register(actor="other")
    answers = [
        await api.command({"type": "heartbeat_agent", "session_id": holder}),
        await api.command({"type": "claim_files", "session_id": holder, "issue": "I-1", "paths": ["src/"]}),
        await api.command({"type": "claim_files", "session_id": other, "issue": "I-2", "paths": ["src/a.py"]}),
    ]
    assert [r.status_code for r in answers] == [200, 200, 409], [r.text for r in answers]
    for r in answers:
        assert r.headers["content-type"] == "application/json", r.headers
        assert int(r.headers["content-length"]) == len(r.content), r.headers
        assert_envelope(r)
    refused = answers[2].json()
    assert refused["error"]["code"] == "FILES_CLAIMED" and refused["events"][0]["type"] == "ClaimConflict", refused


async def test_unknown_session_is_not_found(api: Api) -> None:
    for body in ({"type": "heartbeat_agent", "session_id": "s-nope"}, {"type": "end_agent", "session_id": "s-nope"}):
        err = await api.error(body, 404, "NOT_FOUND")
        assert err["details"] == {"session_id": "s-nope"}


# --- liveness at read time ----------------------------------------------------------------


async def test_liveness_follows_the_ttl_and_a_heartbeat_revives(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    server = start_server(ttl_seconds=1, test_clock=True)
    api = Api(server.base_url)
    try:
        reg = await api.ok({"type": "register_agent", "actor": "short"})
        assert reg["ttl_seconds"] == 1
        a, b = reg["session_id"], await api.register(actor="other")
        await advance_clock(db_url, 1.5)
        deadline = time.monotonic() + 30
        while {a, b} & set(await api.agents(live="true")):
            assert time.monotonic() < deadline, "sessions never went stale"
            await asyncio.sleep(0.2)
        stale = await api.agents(live="false")
        assert stale[a]["live"] is False and stale[a]["ended_at"] is None

        # A heartbeat from a stale, not ended, session revives it. Retried only because a
        # very slow machine could let one second pass between the heartbeat and the read.
        for _ in range(5):
            await api.ok({"type": "heartbeat_agent", "session_id": a})
            if a in await api.agents(live="true"):
                break
        else:
            pytest.fail("a heartbeat did not revive the stale session")
        assert b not in await api.agents(live="true")

        # A stale session may still end; once ended it can do nothing more.
        await api.ok({"type": "end_agent", "session_id": b})
        await api.error({"type": "heartbeat_agent", "session_id": b}, 409, "SESSION_NOT_LIVE")
        await api.error({"type": "end_agent", "session_id": b}, 409, "SESSION_NOT_LIVE")
    finally:
        await api.close()


async def test_the_ttl_is_kept_in_the_database_for_every_replica(start_server: Callable[..., ServerProcess]) -> None:
    first = start_server(ttl_seconds=7)
    second = start_server()  # no --ttl-seconds: reads it from the database
    one, two = Api(first.base_url), Api(second.base_url)
    try:
        assert (await one.ok({"type": "register_agent"}))["ttl_seconds"] == 7
        assert (await two.ok({"type": "register_agent"}))["ttl_seconds"] == 7
    finally:
        await one.close()
        await two.close()


async def test_agents_live_filter_and_default_ttl(api: Api) -> None:
    live_sid = await api.register(actor="l")
    gone = await api.register(actor="g")
    await api.ok({"type": "end_agent", "session_id": gone})
    assert set(await api.agents(live="true")) == {live_sid}
    assert set(await api.agents(live="false")) == {gone}
    assert set(await api.agents()) == {live_sid, gone}


# --- the event log -----------------------------------------------------------------------


async def test_events_page_by_position_after_is_exclusive_and_limit_is_clamped(api: Api, server: ServerProcess) -> None:
    sid = await api.register(actor="pager")
    sem = asyncio.Semaphore(16)

    async def beat() -> None:
        async with sem:
            await api.ok({"type": "heartbeat_agent", "session_id": sid})

    await asyncio.gather(*(beat() for _ in range(1004)))
    total = 1005

    first = (await api.get("/v1/events"))["events"]
    assert [e["position"] for e in first] == list(range(1, 101))  # default limit 100, from 1
    assert first[0]["type"] == "AgentRegistered"
    for e in first:
        assert set(e) >= {"position", "stream", "version", "type", "data", "metadata", "recorded_at"}
        assert e["recorded_at"].endswith("Z")

    page = (await api.get("/v1/events", after=10, limit=5))["events"]
    assert [e["position"] for e in page] == [11, 12, 13, 14, 15]
    clamped = (await api.get("/v1/events", after=0, limit=5000))["events"]
    assert len(clamped) == 1000
    assert [e["position"] for e in clamped] == list(range(1, 1001))
    tail = (await api.get("/v1/events", after=1000, limit=1000))["events"]
    assert [e["position"] for e in tail] == list(range(1001, total + 1))
    assert (await api.get("/v1/events", after=total))["events"] == []
    assert (await api.get("/v1/events", after=total + 50))["events"] == []
    # The session stream's versions are contiguous too.
    assert [e["version"] for e in clamped + tail] == list(range(1, total + 1))

    for params in ({"after": -1}, {"limit": 0}, {"limit": "many"}, {"after": "x"}):
        r = await api.http.get("/v1/events", params=params)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["code"] == "VALIDATION"
        assert r.json()["error"]["details"]["field"] == next(iter(params))


async def test_events_are_scoped_to_the_workspace(api: Api, server: ServerProcess) -> None:
    other = await api.client("admin", "teamB")
    try:
        mine = [await api.register(actor="a1")]
        theirs = [await other.register(actor="b1")]
        mine.append(await api.register(actor="a2"))
        theirs.append(await other.register(actor="b2"))
        default_log = await api.events()
        b_log = await other.events()
        assert [e["data"]["session_id"] for e in default_log] == mine
        assert [e["data"]["session_id"] for e in b_log] == theirs
        assert {e["metadata"]["workspace"] for e in b_log} == {"teamB"}
        # Each workspace's log is a subsequence of the one contiguous store log.
        positions = sorted(e["position"] for e in default_log + b_log)
        assert positions == list(range(1, 5))
        assert [e["position"] for e in b_log] == sorted(e["position"] for e in b_log)
        # after/limit apply to store positions, skipping the other workspace's.
        page = (await other.get("/v1/events", after=b_log[0]["position"], limit=1))["events"]
        assert [e["position"] for e in page] == [b_log[1]["position"]]
    finally:
        await other.close()


async def test_an_after_beyond_any_position_is_not_a_server_error(api: Api) -> None:
    r = await api.http.get("/v1/events", params={"after": str(2**63)})
    if r.status_code == 200:
        assert r.json() == {"events": []}
    else:
        assert r.status_code == 422 and assert_envelope(r)["error"]["details"]["field"] == "after"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(["/v1/events", "/v1/agents"]),
    params=st.dictionaries(
        st.sampled_from(["after", "limit", "live", "other"]),
        st.text(max_size=12) | st.integers(-(2**63), 2**63 - 1).map(str) | st.sampled_from(["true", "false", "1", "0"]),
        max_size=3,
    ),
)
def test_any_query_parameters_answer_data_or_the_envelope(
    server: ServerProcess, path: str, params: dict[str, str]
) -> None:
    with _client(server) as http:
        r = http.get(path, params=params)
        if r.status_code == 200:
            assert isinstance(r.json()["events" if path == "/v1/events" else "agents"], list)
        else:
            body = assert_envelope(r)
            assert body["error"]["code"] == "VALIDATION" and body["error"]["details"]["field"] in params


async def test_correlation_and_command_ids_are_recorded_in_metadata(api: Api) -> None:
    r = await api.http.post(
        "/v1/commands",
        json={"type": "register_agent", "actor": "m", "command_id": "cmd-42"},
        headers={"x-correlation-id": "corr-7"},
    )
    assert r.status_code == 200, r.text
    [event] = await api.events()
    assert event["metadata"]["command_id"] == "cmd-42"
    assert event["metadata"]["correlation_id"] == "corr-7"
    assert event["metadata"]["causation_id"] == "cmd-42"


# --- idempotency --------------------------------------------------------------------------


async def test_same_command_id_and_body_returns_the_first_answer_and_appends_nothing(api: Api) -> None:
    body = {"type": "register_agent", "actor": "idem", "host": "h", "command_id": "c-1"}
    first = await api.command(body)
    assert first.status_code == 200
    after_first = await api.head()
    again = await api.command(body)
    assert again.status_code == 200 and again.content == first.content
    # Compared on the decoded command: member order and whitespace do not matter.
    reordered = await api.http.post(
        "/v1/commands", content=b'{ "command_id" : "c-1", "host": "h", "actor":"idem", "type":"register_agent" }'
    )
    assert reordered.status_code == 200 and reordered.content == first.content
    # Defaults written out are the same command too.
    explicit_default = await api.command({**body, "kind": "agent"})
    assert explicit_default.content == first.content
    assert await api.head() == after_first
    assert len(await api.events()) == 1


async def test_same_command_id_with_another_body_is_a_mismatch(api: Api) -> None:
    await api.ok({"type": "register_agent", "actor": "idem", "command_id": "c-2"})
    before = await api.head()
    err = await api.error(
        {"type": "register_agent", "actor": "other", "command_id": "c-2"}, 422, "IDEMPOTENCY_MISMATCH"
    )
    assert err["details"] == {"command_id": "c-2"}
    await api.error({"type": "end_agent", "session_id": "s-x", "command_id": "c-2"}, 422, "IDEMPOTENCY_MISMATCH")
    assert await api.head() == before


async def test_a_replayed_end_returns_its_first_answer(api: Api) -> None:
    sid = await api.register(actor="x")
    body = {"type": "end_agent", "session_id": sid, "command_id": "end-1"}
    first = await api.command(body)
    assert first.status_code == 200
    again = await api.command(body)
    assert again.status_code == 200 and again.content == first.content  # not SESSION_NOT_LIVE
    await api.error({"type": "end_agent", "session_id": sid, "command_id": "end-2"}, 409, "SESSION_NOT_LIVE")


async def test_a_rejection_that_wrote_nothing_is_decided_again(api: Api) -> None:
    await api.error({"type": "heartbeat_agent", "session_id": "s-missing", "command_id": "c-3"}, 404, "NOT_FOUND")
    # Not stored: the id is still free for another command.
    assert (await api.ok({"type": "register_agent", "command_id": "c-3"}))["session_id"]


async def test_a_command_id_is_scoped_to_the_workspace(api: Api, server: ServerProcess) -> None:
    other = await api.client("admin", "teamB")
    try:
        mine = await api.ok({"type": "register_agent", "actor": "a", "command_id": "shared"})
        theirs = await other.ok({"type": "register_agent", "actor": "b", "command_id": "shared"})
        assert mine["session_id"] != theirs["session_id"]
        same_body = await other.ok({"type": "register_agent", "actor": "a", "command_id": "shared-2"})
        replay_mine = await api.ok({"type": "register_agent", "actor": "a", "command_id": "shared"})
        assert replay_mine == mine and same_body["session_id"] != mine["session_id"]
        assert len(await api.events()) == 1 and len(await other.events()) == 2
    finally:
        await other.close()


async def test_another_token_replaying_a_command_id_is_forbidden(api: Api) -> None:
    alice, bob = await api.client("agent"), await api.client("agent")
    admin2 = await api.client("admin")
    try:
        sid = await alice.register(actor="alice")
        claim = {"type": "claim_issue", "session_id": sid, "project": "P", "issue": "P-1", "command_id": "a-claim"}
        granted = await alice.ok(claim)
        assert granted["fencing_token"]
        register = {"type": "register_agent", "actor": "alice", "command_id": "a-reg"}
        mine = await alice.ok(register)
        before = await api.head()
        # The same command under the same id, from other tokens: the answer is alice's alone.
        for other in (bob, admin2):
            for body in (claim, register):
                err = await other.error(body, 403, "FORBIDDEN")
                assert err["details"] == {"command_id": body["command_id"]}
                assert "fencing_token" not in json.dumps(err) and sid not in json.dumps(err)
            # Another command under that id says no more than that (not IDEMPOTENCY_MISMATCH).
            await other.error({**register, "actor": "mallory"}, 403, "FORBIDDEN")
        assert await api.head() == before  # nothing appended
        # The token that sent it still reads its answer again.
        assert await alice.ok(claim) == granted and await alice.ok(register) == mine
    finally:
        for c in (alice, bob, admin2):
            await c.close()


async def test_concurrent_duplicates_append_once(api: Api) -> None:
    body = {"type": "register_agent", "actor": "racer", "command_id": "race-1"}
    answers = await asyncio.gather(*(api.command(body) for _ in range(12)))
    assert {r.status_code for r in answers} == {200}, [r.text for r in answers]
    assert len({r.content for r in answers}) == 1
    assert [e["type"] for e in await api.events()] == ["AgentRegistered"]


async def test_issue_token_with_a_command_id_never_mints_twice(api: Api) -> None:
    body = {"type": "issue_token", "role": "reader", "command_id": "tok-1"}
    first, again = await api.ok(body), await api.ok(body)
    assert first["token"]
    # The token is shown once; a replay never mints a second one nor stores one in clear.
    assert again == {**first, "token": None, "replayed": True}
    await api.error({**body, "role": "agent"}, 422, "IDEMPOTENCY_MISMATCH")


# --- errors: the envelope for any input -----------------------------------------------------


VALIDATION_CASES: list[tuple[dict[str, Any], str]] = [
    ({"type": "register_agent", "kind": "robot"}, "kind"),
    ({"type": "register_agent", "actor": 5}, "actor"),
    ({"type": "register_agent", "working_on": "not a key"}, "working_on"),
    ({"type": "register_agent", "bogus": True}, "bogus"),
    ({"type": "heartbeat_agent"}, "session_id"),
    ({"type": "heartbeat_agent", "session_id": "s", "working_on": 3}, "working_on"),
    ({"type": "end_agent", "session_id": ["s"]}, "session_id"),
    ({"type": "end_agent", "session_id": "s", "handoff_note": "x" * 70000}, "handoff_note"),
    ({"type": "configure_project", "project": "p", "wip_limit": -1}, "wip_limit"),
    ({"type": "configure_project", "project": "p" * 129, "wip_limit": 1}, "project"),
    ({"type": "issue_token", "role": "superuser"}, "role"),
    ({"type": "issue_token", "role": "agent", "workspace": "has space"}, "workspace"),
    ({"type": "claim_files", "issue": "I-1", "paths": ["a", "b", "c", None]}, "paths[3]"),
    ({"type": "nope"}, "type"),
    ({"actor": "no type"}, "type"),
    ({"type": "register_agent", "command_id": ""}, "command_id"),
]


async def test_validation_names_the_field(api: Api) -> None:
    for body, field in VALIDATION_CASES:
        err = await api.error(body, 422, "VALIDATION")
        assert err["details"]["field"] == field, (body, err)
    assert await api.head() == 0


async def test_malformed_json_is_validation_on_the_body(api: Api) -> None:
    for raw in (b"", b"{", b"not json", b"[]", b"null", b"\xff\xfe\x00", b'{"type":"register_agent"}{}'):
        r = await api.http.post("/v1/commands", content=raw)
        assert r.status_code == 422, (raw, r.text)
        err = r.json()["error"]
        assert (err["code"], err["details"]) == ("VALIDATION", {"field": "body"}), (raw, r.text)


async def test_a_body_above_one_mebibyte_is_refused_with_413(api: Api) -> None:
    small = b'{"type":"register_agent"}'
    at_limit = small + b" " * (1024 * 1024 - len(small))
    r = await api.http.post("/v1/commands", content=at_limit)
    assert r.status_code == 200, r.text[:300]
    over = small + b" " * (1024 * 1024 - len(small) + 1)
    r = await api.http.post("/v1/commands", content=over)
    assert r.status_code == 413, r.text[:300]
    assert r.json()["ok"] is False and r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    huge = json.dumps({"type": "register_agent", "actor": "a" * (3 * 1024 * 1024)}).encode()
    r = await api.http.post("/v1/commands", content=huge)
    assert r.status_code == 413 and r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"

    async def chunks() -> Any:
        for _ in range(20):
            yield b" " * 100_000
        yield small

    r = await api.http.post("/v1/commands", content=chunks())  # no content-length
    assert r.status_code == 413 and r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert len(await api.events()) == 1


async def test_without_or_with_an_unknown_token_is_401(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        for headers in (
            {},
            {"authorization": "Bearer nope"},
            {"authorization": f"Basic {BOOTSTRAP}"},
            {"authorization": "Bearer"},
        ):
            for method, path in (("POST", "/v1/commands"), ("GET", "/v1/events"), ("GET", "/v1/agents")):
                r = await http.request(method, path, headers=headers, json={"type": "register_agent"})
                assert r.status_code == 401, (headers, path, r.text)
                assert r.json()["ok"] is False and r.json()["error"]["code"] == "UNAUTHENTICATED"
        assert (await http.get("/health")).json()["head"] == 0


async def test_reader_reads_but_may_not_post_commands(api: Api, server: ServerProcess) -> None:
    sid = await api.register(actor="seen")
    reader = await api.client("reader")
    try:
        for body in (
            {"type": "register_agent"},
            {"type": "heartbeat_agent", "session_id": sid},
            {"type": "end_agent", "session_id": sid},
            {"type": "issue_token", "role": "reader"},
        ):
            await reader.error(body, 403, "FORBIDDEN")
        assert [e["data"]["session_id"] for e in await reader.events()] == [sid]
        assert sid in await reader.agents()
    finally:
        await reader.close()


async def test_only_an_admin_issues_tokens_and_configures_projects(api: Api, server: ServerProcess) -> None:
    for role in ("agent", "human", "reader"):
        other = await api.client(role)
        try:
            await other.error({"type": "issue_token", "role": "reader"}, 403, "FORBIDDEN")
            await other.error({"type": "configure_project", "project": "P", "wip_limit": 2}, 403, "FORBIDDEN")
        finally:
            await other.close()
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 2})
    [event] = await api.events()
    assert event["type"] == "ProjectConfigured" and event["data"] == {"project": "P", "wip_limit": 2}


async def test_a_session_of_another_workspace_is_invisible(api: Api, server: ServerProcess) -> None:
    a_sid = await api.register(actor="in-default")
    other = await api.client("admin", "teamB")
    try:
        for body in (
            {"type": "heartbeat_agent", "session_id": a_sid},
            {"type": "heartbeat_agent", "session_id": a_sid, "handoff_note": "steal"},
            {"type": "end_agent", "session_id": a_sid},
        ):
            err = await other.error(body, 404, "NOT_FOUND")
            assert err["details"] == {"session_id": a_sid}
        await other.error(
            {"type": "claim_issue", "session_id": a_sid, "project": "P", "issue": "P-1"}, 404, "NOT_FOUND"
        )
        assert a_sid not in await other.agents()
        assert await other.events() == []
        # ... and the session is untouched in its own workspace.
        assert (await api.agents())[a_sid]["live"] is True
        assert len(await api.events()) == 1
    finally:
        await other.close()


async def test_unknown_route_and_method_answer_the_envelope(api: Api, server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as anonymous:
        unauthenticated = await anonymous.get("/v2/whatever")
    for r in (
        await api.http.get("/v1/nothing-here"),
        await api.http.get("/"),
        await api.http.post("/v1/events", json={}),
        await api.http.delete("/v1/commands"),
        unauthenticated,
    ):
        body = assert_envelope(r)
        assert r.status_code in (404, 405)
        assert body["error"]["code"] == ("NOT_FOUND" if r.status_code == 404 else "METHOD_NOT_ALLOWED")


async def test_a_control_character_in_a_command_id_is_refused_as_validation(api: Api) -> None:
    for command_id in ("bad\x00id", "\x00", "tab\there", "c1\x85"):
        r = await api.command({"type": "register_agent", "command_id": command_id})
        body = assert_envelope(r)
        assert r.status_code == 422
        assert body["error"]["details"]["field"] == "command_id"


async def test_deeply_nested_json_answers_the_envelope(api: Api) -> None:
    deep = b"[" * 2000 + b"]" * 2000
    for raw in (
        b'{"x":' + deep + b',"type":"register_agent"}',
        b'{"type":"enqueue_work","project":"P","payload":' + deep + b"}",
    ):
        r = await api.http.post("/v1/commands", content=raw)
        assert_envelope(r)
        assert r.status_code == 422


MINIMAL: dict[str, dict[str, Any]] = {
    "register_agent": {},
    "heartbeat_agent": {"session_id": "$sid"},
    "end_agent": {"session_id": "$sid"},
    "configure_project": {"project": "P", "wip_limit": 3},
    "issue_token": {"role": "reader"},
    "revoke_token": {"token_id": "tok_0123456789abcdef01234567"},
    "claim_issue": {"session_id": "$sid", "project": "P", "issue": "P-1"},
    "release_issue": {"session_id": "$sid", "issue": "P-1"},
    "claim_files": {"session_id": "$sid", "issue": "P-1", "paths": ["src/a.py"]},
    "release_files": {"session_id": "$sid", "issue": "P-1"},
    "post_message": {"session_id": "$sid", "channel": "issue:P-1", "body": "hi"},
    "verify_hold": {"session_id": "$sid", "issue": "P-1"},
    "enqueue_work": {"project": "P"},
    "claim_next_work": {"session_id": "$sid", "project": "P"},
    "start_work": {"session_id": "$sid", "item_id": "w-none"},
    "finish_work": {"session_id": "$sid", "item_id": "w-none"},
    "acquire_lease": {"session_id": "$sid", "name": "dispatcher"},
    "renew_lease": {"session_id": "$sid", "name": "dispatcher"},
    "release_lease": {"session_id": "$sid", "name": "dispatcher"},
    "cancel_wait": {"session_id": "$sid", "issue": "P-1"},
}


async def test_every_decodable_command_answers_an_envelope(api: Api) -> None:
    assert set(MINIMAL) == set(COMMAND_TYPES), "add the new command to MINIMAL"
    for tag in sorted(COMMAND_TYPES):
        sid = await api.register(actor="any")
        body = {"type": tag, **{k: (sid if v == "$sid" else v) for k, v in MINIMAL[tag].items()}}
        for _ in range(2):  # the second time against the state the first one left
            assert_envelope(await api.command(body))


# --- errors: property tests over random input ---------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)
FOUNDATION = ("register_agent", "heartbeat_agent", "end_agent", "configure_project", "issue_token")
HYPOTHESIS = settings(
    max_examples=150,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _client(server: ServerProcess) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, headers={"authorization": f"Bearer {BOOTSTRAP}"}, timeout=30)


@HYPOTHESIS
@given(value=json_values)
def test_any_json_value_answers_an_envelope(server: ServerProcess, value: Any) -> None:
    with _client(server) as http:
        assert_envelope(http.post("/v1/commands", content=json.dumps(value).encode()))


@HYPOTHESIS
@given(raw=st.binary(max_size=300))
def test_any_bytes_answer_an_envelope(server: ServerProcess, raw: bytes) -> None:
    with _client(server) as http:
        r = http.post("/v1/commands", content=raw)
        body = assert_envelope(r)
        if r.status_code == 422:
            assert body["error"]["details"]["field"]


@HYPOTHESIS
@given(
    tag=st.sampled_from(FOUNDATION),
    data=st.data(),
    value=json_values,
)
def test_one_bad_field_is_named(server: ServerProcess, tag: str, data: st.DataObject, value: Any) -> None:
    """A valid foundation command with one field replaced by any JSON value.

    It is accepted, refused by the domain, or refused as VALIDATION naming that field.
    (``command_id`` is left out: its NUL case is a known bug, tested on its own above.)
    """
    with _client(server) as http:
        sid = http.post("/v1/commands", json={"type": "register_agent", "actor": "fuzz"}).json()["result"]["session_id"]
        valid: dict[str, Any] = {"type": tag, **{k: (sid if v == "$sid" else v) for k, v in MINIMAL[tag].items()}}
        names = sorted(f.name for f in msgspec.structs.fields(COMMAND_TYPES[tag]) if f.name != "command_id")
        name = data.draw(st.sampled_from([*names, "unknown_member"]), label="field")
        r = http.post("/v1/commands", json={**valid, name: value})
        body = assert_envelope(r)
        if r.status_code == 422 and body["error"]["code"] == "VALIDATION":
            field = body["error"]["details"]["field"]
            assert field == name or field.startswith((name + "[", name + ".")), (name, value, body)


# --- issue_token and the bootstrap token ---------------------------------------------------


async def test_the_bootstrap_token_is_admin_of_default_and_may_create_workspaces(
    api: Api, server: ServerProcess
) -> None:
    sid = await api.register(actor="boot")
    default_token = await api.token("agent")
    b_token = await api.ok({"type": "issue_token", "role": "admin", "workspace": "teamB"})
    assert b_token["token"] and b_token.get("workspace", "teamB") == "teamB"
    default_agent = Api(server.base_url, default_token)
    b_admin = Api(server.base_url, b_token["token"])
    try:
        # The bootstrap token's workspace is default: a default token sees its session.
        assert sid in await default_agent.agents()
        assert (await default_agent.events())[0]["metadata"]["workspace"] == "default"
        r = await api.command({"type": "issue_token", "role": "reader"})
        assert r.json()["events"] == [] and r.json()["position"] == await api.head()  # appended nothing
        b_sid = await b_admin.register(actor="b")
        assert (await b_admin.events())[0]["metadata"]["workspace"] == "teamB"
        assert b_sid not in await api.agents()
        # A plain admin issues tokens for its own workspace only.
        own = await b_admin.ok({"type": "issue_token", "role": "reader"})
        assert own.get("workspace", "teamB") == "teamB"
        await b_admin.ok({"type": "issue_token", "role": "agent", "workspace": "teamB"})
        await b_admin.error({"type": "issue_token", "role": "admin", "workspace": "default"}, 403, "FORBIDDEN")
        await b_admin.error({"type": "issue_token", "role": "admin", "workspace": "teamC"}, 403, "FORBIDDEN")
        b_reader = Api(server.base_url, own["token"])
        try:
            assert b_sid in await b_reader.agents()
            assert sid not in await b_reader.agents()
        finally:
            await b_reader.close()
    finally:
        await default_agent.close()
        await b_admin.close()


async def test_issued_tokens_are_not_in_the_log(api: Api) -> None:
    token = await api.token("admin", "teamB")
    r = await api.http.get("/v1/events", params={"limit": 1000})
    assert token not in r.text
    assert await api.head() == 0


# --- concurrency -------------------------------------------------------------------------


async def test_fifty_concurrent_clients_register_and_heartbeat(server: ServerProcess) -> None:
    clients = [Api(server.base_url) for _ in range(50)]

    async def run(client: Api, i: int) -> tuple[str, list[int]]:
        reg = await client.command({"type": "register_agent", "actor": f"agent-{i}", "host": f"h{i}"})
        assert reg.status_code == 200, reg.text
        sid = reg.json()["result"]["session_id"]
        # A refused command in the same batch must leave no hole behind it.
        miss = await client.command({"type": "heartbeat_agent", "session_id": f"s-missing-{i}"})
        assert miss.status_code == 404, miss.text
        hb = await client.command({"type": "heartbeat_agent", "session_id": sid, "working_on": f"ISS-{i}"})
        assert hb.status_code == 200, hb.text
        positions = []
        for r in (reg, hb):
            body = r.json()
            assert [e["position"] for e in body["events"]][-1] == body["position"]
            positions.extend(e["position"] for e in body["events"])
        return sid, positions

    reader = Api(server.base_url)
    writers_done = asyncio.Event()
    tailed: list[int] = []

    async def tail() -> None:
        """A reader following the log while the writers run must never skip a position."""
        after = 0
        while True:
            finished = writers_done.is_set()
            page = (await reader.get("/v1/events", after=after, limit=1000))["events"]
            for e in page:
                assert e["position"] == after + 1, f"tailing reader skipped from {after} to {e['position']}"
                after = e["position"]
                tailed.append(after)
            if finished and not page:
                return
            await asyncio.sleep(0.002)

    try:
        tailer = asyncio.create_task(tail())
        results = await asyncio.gather(*(run(c, i) for i, c in enumerate(clients)))
        writers_done.set()
        await tailer
        assert tailed == list(range(1, 101))
        positions = [p for _, ps in results for p in ps]
        assert len(positions) == len(set(positions)) == 100
        log = await clients[0].events()
        assert [e["position"] for e in log] == list(range(1, 101))  # contiguous, no holes
        assert sorted(positions) == list(range(1, 101))
        by_position = {e["position"]: e for e in log}
        for sid, (reg_pos, hb_pos) in results:
            assert (
                by_position[reg_pos]["type"] == "AgentRegistered" and by_position[reg_pos]["data"]["session_id"] == sid
            )
            assert by_position[hb_pos]["type"] == "AgentHeartbeat" and by_position[hb_pos]["data"]["session_id"] == sid
            assert reg_pos < hb_pos
        live = await clients[0].agents(live="true")
        assert len(live) == 50
        assert {a["working_on"] for a in live.values()} == {f"ISS-{i}" for i in range(50)}
    finally:
        await asyncio.gather(*(c.close() for c in [*clients, reader]))


async def test_two_servers_on_one_database_share_one_contiguous_log(start_server: Callable[..., ServerProcess]) -> None:
    """Replicas share nothing but the database: positions, sessions and command ids agree."""
    servers = [start_server(), start_server()]
    clients = [Api(servers[i % 2].base_url) for i in range(40)]

    async def run(client: Api, i: int) -> list[int]:
        sid = await client.register(actor=f"r{i}")
        other = clients[(i + 1) % len(clients)]  # a client of the other replica
        body = await other.command({"type": "heartbeat_agent", "session_id": sid, "working_on": f"ISS-{i}"})
        assert body.status_code == 200, body.text
        return [e["position"] for e in body.json()["events"]]

    try:
        await asyncio.gather(*(run(c, i) for i, c in enumerate(clients)))
        same = {"type": "register_agent", "actor": "once", "command_id": "across-replicas"}
        answers = await asyncio.gather(*(c.command(same) for c in clients[:10]))
        assert {r.status_code for r in answers} == {200} and len({r.content for r in answers}) == 1
        log = await clients[0].events()
        assert [e["position"] for e in log] == list(range(1, 82))
        assert log == await clients[1].events()
        assert len(await clients[1].agents(live="true")) == 41
    finally:
        await asyncio.gather(*(c.close() for c in clients))
