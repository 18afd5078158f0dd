"""The OpenAPI schema describes every command and answer, and a bounded schemathesis run
against it finds no 5xx on either backend."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from tests.helpers import BOOTSTRAP, ServerProcess

from eventcoord.codec import decode_command
from eventcoord.commands import COMMAND_TYPES

#: Examples per operation and generation mode: a bounded run (a few seconds per backend).
EXAMPLES = 12


def openapi(server: ServerProcess) -> dict[str, Any]:
    r = httpx.get(server.base_url + "/schema/openapi.json", timeout=30)
    assert r.status_code == 200
    schema: dict[str, Any] = r.json()
    return schema


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    out: dict[str, Any] = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return out


@pytest.mark.sqlite
def test_the_command_body_is_the_tagged_union_of_every_command(server: ServerProcess) -> None:
    schema = openapi(server)
    post = schema["paths"]["/v1/commands"]["post"]
    content = post["requestBody"]["content"]["application/json"]
    union = resolve(schema, content["schema"])
    assert union["discriminator"]["propertyName"] == "type"
    assert set(union["discriminator"]["mapping"]) == set(COMMAND_TYPES)
    # every example is a command the server decodes (and one per command)
    assert set(content["examples"]) == set(COMMAND_TYPES)
    for tag, example in content["examples"].items():
        assert type(decode_command(json.dumps(example["value"]).encode())).__struct_config__.tag == tag
    for name in ("ClaimIssue", "RevokeToken"):
        fields = schema["components"]["schemas"][name]["properties"]
        assert "type" in fields
    assert resolve(schema, post["responses"]["200"]["content"]["application/json"]["schema"])["required"]
    assert "error" in resolve(schema, post["responses"]["409"]["content"]["application/json"]["schema"])["properties"]
    # names are published with the JSON Schema (ECMA) end anchor, matched whole
    assert schema["components"]["schemas"]["ClaimIssue"]["properties"]["issue"]["pattern"].endswith("$")


@pytest.mark.sqlite
def test_the_hook_route_is_described_with_the_harnesses_payloads_and_answer(server: ServerProcess) -> None:
    schema = openapi(server)
    post = schema["paths"]["/v1/hooks/{harness}"]["post"]
    assert post["operationId"] == "postHook" and "never an ``allow``" in post["description"]
    [harness] = post["parameters"]
    assert harness["name"] == "harness" and harness["schema"]["enum"] == ["claude", "codex"]
    content = post["requestBody"]["content"]["application/json"]
    union = resolve(schema, content["schema"])
    assert union["discriminator"]["propertyName"] == "hook_event_name"
    assert {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"} <= set(
        union["discriminator"]["mapping"]
    )
    for name, example in content["examples"].items():
        r = httpx.post(
            server.base_url + "/v1/hooks/claude",
            json=example["value"],
            headers={"authorization": f"Bearer {BOOTSTRAP}"},
            timeout=30,
        )
        assert r.status_code == 200, (name, r.text)
    answer = resolve(schema, post["responses"]["200"]["content"]["application/json"]["schema"])
    assert set(answer["properties"]) == {"hookSpecificOutput"}
    assert "error" in resolve(schema, post["responses"]["422"]["content"]["application/json"]["schema"])["properties"]


@pytest.mark.sqlite
def test_every_read_answers_a_described_shape(server: ServerProcess) -> None:
    schema = openapi(server)
    reads = [
        op
        for item in schema["paths"].values()
        for m, op in item.items()
        if m == "get" and op.get("operationId", "").startswith(("list", "get", "issue", "code"))
    ]
    assert len(reads) >= 11
    for op in reads:
        body = resolve(schema, op["responses"]["200"]["content"]["application/json"]["schema"])
        assert body.get("properties"), op["operationId"]


def test_schemathesis_finds_no_server_error(server: ServerProcess) -> None:
    schema = schemathesis.openapi.from_url(server.base_url + "/schema/openapi.json")
    auth = {"authorization": f"Bearer {BOOTSTRAP}"}
    errors: list[str] = []
    seen = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path.startswith(("/v1/events/stream", "/metrics")):
            continue  # an endless stream; plain text
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            def run(case: Any) -> None:
                nonlocal seen
                response = case.call(base_url=server.base_url, headers=auth, timeout=30)
                seen += 1
                if response.status_code >= 500:
                    errors.append(
                        f"{case.method} {case.formatted_path} {case.query} {str(case.body)[:200]} -> "
                        f"{response.status_code} {response.text[:200]}"
                    )

            try:
                run()
            except Unsatisfiable:  # nothing to negate in this operation (e.g. no parameters)
                assert mode is GenerationMode.NEGATIVE
    assert seen > 100
    assert errors == []
    assert httpx.get(server.base_url + "/health", timeout=10).status_code == 200
