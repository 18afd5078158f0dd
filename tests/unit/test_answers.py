"""A command's answer as the ASGI messages it sends (``api.answers.CommandAnswer``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from eventcoord.api.answers import outcome_response
from eventcoord.errors import DomainError, ErrorCode
from eventcoord.service import EventRef, Outcome


def _sent(outcome: Outcome) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    asyncio.run(outcome_response(outcome)({"type": "http"}, None, send))
    return messages


def test_a_success_is_sent_as_json_with_its_length() -> None:
    start, body = _sent(Outcome({"n": 1}, None, [EventRef(7, "AgentHeartbeat")], 7, 1))
    assert start == {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body["body"])).encode())],
    }
    assert body["type"] == "http.response.body" and body["more_body"] is False
    assert json.loads(body["body"]) == {
        "ok": True,
        "result": {"n": 1},
        "events": [{"position": 7, "type": "AgentHeartbeat"}],
        "position": 7,
    }


def test_a_recorded_refusal_keeps_its_status_and_asks_for_its_wait() -> None:
    refusal = DomainError(ErrorCode.RATE_LIMITED, "slow down", retry_after=3)
    start, body = _sent(Outcome(None, refusal, [EventRef(9, "ClaimConflict")], 9, 1))
    assert start["status"] == refusal.status
    assert dict(start["headers"])[b"retry-after"] == b"3"
    assert int(dict(start["headers"])[b"content-length"]) == len(body["body"])
    answer = json.loads(body["body"])
    assert answer["ok"] is False and answer["error"]["code"] == "RATE_LIMITED" and answer["position"] == 9
