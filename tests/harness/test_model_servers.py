"""The scripted model stand-in waits for tools the way a model would: by what each request offers."""

from __future__ import annotations

import json
from typing import Any

import httpx
from tests.harness.model_servers import WAIT_FOR_MCP, Answer, AwaitTools, MessagesServer, ToolCall

MINE = ("mcp__eventcoord__list_file_claims",)


def ask(model: MessagesServer, *tools: str) -> dict[str, Any]:
    """One streamed request offering ``tools``: the content block the stand-in started."""
    body = {"model": "m", "stream": True, "messages": [], "tools": [{"name": t} for t in tools]}
    text = httpx.post(f"{model.url}/v1/messages?beta=true", json=body).text
    for chunk in text.split("\n\n"):
        if chunk.startswith("event: content_block_start"):
            block: dict[str, Any] = json.loads(chunk.split("data: ", 1)[1])["content_block"]
            return block
    raise AssertionError(text)


def script() -> list[ToolCall | Answer | AwaitTools]:
    return [AwaitTools(MINE), ToolCall(MINE[0], {}), Answer("alice holds it")]


def test_tools_offered_at_once_are_called_without_waiting() -> None:
    with MessagesServer(script()) as model:
        assert ask(model, "Read", *MINE)["name"] == MINE[0]
        assert ask(model, "Read", *MINE)["text"] == ""  # the answer
    assert model.calls == [MINE[0]]


def test_while_the_harness_offers_the_wait_the_model_waits() -> None:
    with MessagesServer(script()) as model:
        assert ask(model, "Read", WAIT_FOR_MCP)["name"] == WAIT_FOR_MCP
        assert ask(model, "Read", WAIT_FOR_MCP)["name"] == WAIT_FOR_MCP
        assert ask(model, "Read", *MINE)["name"] == MINE[0]
    assert model.calls == [WAIT_FOR_MCP, WAIT_FOR_MCP, MINE[0]]


def test_tools_never_offered_end_the_script() -> None:
    with MessagesServer(script()) as model:
        assert ask(model, "Read")["type"] == "text"
        assert ask(model, "Read", *MINE)["type"] == "text"  # past the script: answers only
    assert model.calls == []
    with MessagesServer([AwaitTools(MINE, attempts=1), ToolCall(MINE[0], {})]) as model:
        assert ask(model, WAIT_FOR_MCP)["name"] == WAIT_FOR_MCP
        assert ask(model, WAIT_FOR_MCP)["type"] == "text"  # waited as long as it may
    assert model.calls == [WAIT_FOR_MCP]
