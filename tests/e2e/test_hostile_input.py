"""Hostile input over HTTP against real servers, on both backends:
names match whole strings, query input no store could take is 422 ``VALIDATION`` (never a
5xx), and a body that is not JSON is 415."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.helpers import Api, ServerProcess

BIG = str(2**63)  # one past the largest BIGINT

INT_QUERIES = [
    ("/v1/queue", "after", BIG),
    ("/v1/queue", "limit", BIG),
    ("/v1/conflicts", "after", BIG),
    ("/v1/conflicts", "before", BIG),
    ("/v1/conflicts", "limit", "-" + str(2**63 + 1)),
    ("/v1/events", "after", BIG),
    ("/v1/events", "limit", BIG),
    ("/v1/messages", "after", BIG),
    ("/v1/file-claims", "limit", BIG),
    ("/v1/heatmap", "depth", BIG),
    ("/v1/agents", "limit", BIG),
    ("/v1/leases", "limit", BIG),
    ("/v1/events/stream", "after", BIG),
]

NUL_QUERIES = [
    ("/v1/leases", {"project": "\x00"}),
    ("/v1/leases", {"session": "a\x00b"}),
    ("/v1/file-claims", {"issue": "\x00"}),
    ("/v1/file-claims", {"session_id": "\x00"}),
    ("/v1/file-claims", {"prefix": "src/\x00"}),
    ("/v1/queue", {"project": "\x00"}),
    ("/v1/conflicts", {"prefix": "\x00"}),
    ("/v1/conflicts", {"since": "\x00"}),
    ("/v1/heatmap", {"prefix": "\x00"}),
    ("/v1/messages", {"channel": "issue:\x00"}),
    ("/v1/issues/I-1/state", {"as": "\x00"}),
    ("/v1/named-leases", {"name": "\x00"}),
    ("/v1/agents", {"\x00": "1"}),
]


async def test_integers_past_the_bigint_range_are_validation_errors(api: Api) -> None:
    for path, name, value in INT_QUERIES:
        r = await api.http.get(
            path, params={name: value} | ({"channel": "issue:I-1"} if path == "/v1/messages" else {})
        )
        assert r.status_code == 422, (path, name, r.text)
        assert r.json()["error"]["code"] == "VALIDATION", (path, r.text)
        assert r.json()["error"]["details"]["field"] == name, (path, r.text)


async def test_a_nul_in_any_string_parameter_is_a_validation_error(api: Api) -> None:
    for path, params in NUL_QUERIES:
        r = await api.http.get(path, params=params)
        assert r.status_code == 422, (path, params, r.text)
        assert r.json()["error"]["code"] == "VALIDATION", (path, r.text)
    for path in ("/v1/agents/%00", "/v1/agents/a%00b", "/v1/issues/%00/state", "/v1/issues/I%00-1/state"):
        r = await api.http.get(path)
        assert r.status_code == 422, (path, r.text)
        assert r.json()["error"]["code"] == "VALIDATION", (path, r.text)
    # the same reads without the NUL answer
    assert (await api.http.get("/v1/leases", params={"project": "P"})).status_code == 200
    assert (await api.http.get("/v1/agents/nobody")).status_code == 404


async def test_the_command_endpoint_refuses_what_every_route_refuses(api: Api) -> None:
    """``POST /v1/commands`` is an ASGI route (no Litestar request, no before_request hook):
    a query parameter no store could take is still 422 ``VALIDATION`` and nothing is
    appended; OPTIONS is told what it allows, as every route answers it; any other method is
    405 ``METHOD_NOT_ALLOWED``; the refusals in the error envelope."""
    sid = await api.register(actor="q")
    head = (await api.get("/v1/events", params={"limit": 1000}))["events"][-1]["position"]
    body = {"type": "heartbeat_agent", "session_id": sid}
    for params in ({"x": "\x00"}, {"\x00": "1"}):
        r = await api.http.post("/v1/commands", params=params, json=body)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["ok"] is False and r.json()["error"]["code"] == "VALIDATION", r.text
    after = (await api.get("/v1/events", params={"limit": 1000}))["events"][-1]["position"]
    assert after == head  # nothing was appended
    r = await api.http.post("/v1/commands", params={"x": "1"}, json=body)  # a harmless one is ignored
    assert r.status_code == 200 and r.json()["ok"] is True, r.text
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        r = await api.http.request(method, "/v1/commands", json=body)
        assert r.status_code == 405, (method, r.text)
        assert r.json()["error"]["code"] == "METHOD_NOT_ALLOWED", (method, r.text)
    r = await api.http.options("/v1/commands")  # as for every other route: what it allows
    assert r.status_code == 204 and r.headers["allow"] == "OPTIONS, POST" and r.content == b"", r.headers


@pytest.mark.parametrize("last", [BIG.encode(), b"99999999999999999999999", b"-1", b"abc", "\uff11\uff12".encode()])
async def test_an_out_of_range_last_event_id_is_a_validation_error(api: Api, last: bytes) -> None:
    r = await api.http.get("/v1/events/stream", headers={"last-event-id": last})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == {
        "code": "VALIDATION",
        "message": r.json()["error"]["message"],
        "details": {"field": "Last-Event-ID"},
    }


async def test_a_last_event_id_in_range_resumes_after_it(api: Api) -> None:
    await api.register(actor="a")
    await api.register(actor="b")
    async with api.http.stream("GET", "/v1/events/stream", headers={"last-event-id": "1"}) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("id:"):
                assert line == "id: 2"
                break


NEWLINE_NAMES: list[tuple[dict[str, Any], str]] = [
    ({"type": "claim_issue", "project": "P", "issue": "NL-1\n"}, "issue"),
    ({"type": "claim_issue", "project": "P\n", "issue": "NL-1"}, "project"),
    ({"type": "acquire_lease", "name": "leader\n"}, "name"),
    ({"type": "post_message", "channel": "issue:NL-1\n", "body": "hi"}, "channel"),
    ({"type": "heartbeat_agent", "command_id": "c-1\n"}, "command_id"),
    ({"type": "issue_token", "role": "agent", "workspace": "evil\n"}, "workspace"),
]


async def test_names_with_a_trailing_newline_are_refused_and_never_counted(api: Api) -> None:
    sid = await api.register(actor="nl")
    for body, field in NEWLINE_NAMES:
        err = await api.error({**body, "session_id": sid}, 422, "VALIDATION")
        assert err["details"]["field"] == field
    await api.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "NL-1"})
    leases = (await api.get("/v1/leases"))["leases"]
    assert [x["issue"] for x in leases] == ["NL-1"]
    for path in ("/v1/issues/NL-1%0A/state", "/v1/messages?channel=issue:NL-1%0A"):
        r = await api.http.get(path)
        assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION", (path, r.text)


def _unauthenticated_health(server: ServerProcess) -> int:
    return httpx.get(server.base_url + "/health", timeout=5).status_code


async def test_the_server_stays_healthy_after_hostile_input(api: Api, server: ServerProcess) -> None:
    await test_integers_past_the_bigint_range_are_validation_errors(api)
    await test_a_nul_in_any_string_parameter_is_a_validation_error(api)
    assert _unauthenticated_health(server) == 200


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/jsonx",
        "text/json",
    ],
)
async def test_a_body_that_is_not_json_is_415(api: Api, content_type: str) -> None:
    body = b'{"type": "register_agent", "actor": "a"}'
    r = await api.http.post("/v1/commands", content=body, headers={"content-type": content_type})
    assert r.status_code == 415, r.text
    assert r.json()["ok"] is False and r.json()["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"
    assert await api.events() == []


async def test_json_bodies_with_parameters_or_without_a_content_type_are_read(api: Api) -> None:
    body = b'{"type": "register_agent", "actor": "a"}'
    for headers in ({"content-type": "application/json; charset=utf-8"}, {"content-type": "Application/JSON"}, {}):
        r = await api.http.post("/v1/commands", content=body, headers=headers)
        assert r.status_code == 200, (headers, r.text)
    assert len(await api.events("AgentRegistered")) == 3
