"""Scripted stand-ins of the two model APIs the real harnesses call, on 127.0.0.1.

``MessagesServer`` speaks the Anthropic Messages API (Claude Code), ``ResponsesServer``
the OpenAI Responses API (Codex); both stream SSE. A script is a list of turns, one per
model request: ``ToolCall`` asks the harness to run a tool, ``Answer`` ends with text (also
what every request past the script gets), ``AwaitTools`` waits until the harness offers some
tools (which it may connect while the model already runs). Every request is recorded, so a test can read
what the harness told the model (a tool result, a hook's deny reason), and ``observe``,
called before each model answer, records what the test wants to see while the harness
is still running (the claims of a live session, say).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar


@dataclass(frozen=True)
class ToolCall:
    """The model calls ``name``: Claude tools take a JSON ``input``; Codex's apply_patch the patch
    text, its function tools (``exec_command``) a JSON ``input`` (their arguments)."""

    name: str
    input: dict[str, Any] | str


@dataclass(frozen=True)
class Answer:
    """The model answers ``text`` and ends its turn."""

    text: str = "done"


@dataclass(frozen=True)
class AwaitTools:
    """Until the request offers every tool in ``names``, the model calls ``WaitForMcpServers``
    (Claude Code offers it while MCP servers still connect); once they are offered, the turn
    takes no request of its own and the next turn answers. A request offering neither them nor
    the wait ends the script with an answer saying so (the harness never connected them)."""

    names: tuple[str, ...]
    #: Waits at most, before the script gives up the same way.
    attempts: int = 5


#: The tool Claude Code offers while its MCP servers connect beside the first request.
WAIT_FOR_MCP = "WaitForMcpServers"

Turn = ToolCall | Answer | AwaitTools
_S = TypeVar("_S", bound="_ModelServer")


@dataclass
class Recorded:
    """One request as the stand-in received it."""

    method: str
    path: str
    body: dict[str, Any] = field(default_factory=dict)


class _ModelServer:
    """One HTTP server in a daemon thread; subclasses write the turn as their API streams it."""

    def __init__(self, script: list[Turn], observe: Callable[[], Any] | None = None) -> None:
        self.script = list(script)
        self.observe = observe
        #: What ``observe`` returned before each model answer, in order.
        self.observations: list[Any] = []
        #: The tools the stand-in asked the harness to run, in order.
        self.calls: list[str] = []
        self.requests: list[Recorded] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                owner._record(self, {})
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                owner._record(self, {})
                self._json(404, {"error": {"type": "not_found", "message": self.path}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else {}
                owner._record(self, body)
                if not owner.serves(self.path):
                    self._json(404, {"error": {"type": "not_found", "message": self.path}})
                    return
                if owner.observe is not None:
                    owner.observations.append(owner.observe())
                events = owner.stream(owner._next_turn(body), next(owner._ids), body)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def _record(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(Recorded(handler.command, handler.path, body))

    def _next_turn(self, body: dict[str, Any]) -> ToolCall | Answer:
        offered = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        with self._lock:
            while self.script and isinstance(await_ := self.script[0], AwaitTools):
                missing = [n for n in await_.names if n not in offered]
                if not missing:
                    self.script.pop(0)
                    continue
                if WAIT_FOR_MCP not in offered or await_.attempts == 0:
                    self.script.clear()
                    return Answer(f"never offered: {', '.join(missing)}")
                self.script[0] = AwaitTools(await_.names, await_.attempts - 1)
                self.calls.append(WAIT_FOR_MCP)
                return ToolCall(WAIT_FOR_MCP, {})
            turn = self.script.pop(0) if self.script else Answer()
            if isinstance(turn, ToolCall):
                self.calls.append(turn.name)
            return turn

    def model_requests(self) -> list[dict[str, Any]]:
        """The bodies of the model calls, in order."""
        return [r.body for r in self.requests if r.method == "POST" and self.serves(r.path)]

    def serves(self, path: str) -> bool:
        raise NotImplementedError

    def stream(self, turn: ToolCall | Answer, n: int, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        raise NotImplementedError

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MessagesServer(_ModelServer):
    """The Messages API as Claude Code streams it (``POST /v1/messages``)."""

    def serves(self, path: str) -> bool:
        return path.split("?", 1)[0] == "/v1/messages"

    def stream(self, turn: ToolCall | Answer, n: int, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        model = body.get("model", "claude-stand-in")
        usage = {"input_tokens": 10, "output_tokens": 1}
        start = {
            "type": "message_start",
            "message": {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        }
        if isinstance(turn, ToolCall):
            block = {"type": "tool_use", "id": f"toolu_{n}", "name": turn.name, "input": {}}
            arguments = json.dumps(turn.input)
            half = len(arguments) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": piece} for piece in (arguments[:half], arguments[half:])
            ]
            stop_reason = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": turn.text}]
            stop_reason = "end_turn"
        return [
            ("message_start", start),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            *[("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d}) for d in deltas],
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]

    def tool_results(self) -> list[dict[str, Any]]:
        """Every ``tool_result`` block the harness sent back, in order."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for body in self.model_requests():
            for message in body.get("messages", []):
                content = message.get("content")
                if message.get("role") != "user" or not isinstance(content, list):
                    continue
                for block in content:
                    if block.get("type") == "tool_result" and block.get("tool_use_id") not in seen:
                        seen.add(block.get("tool_use_id"))
                        out.append(block)
        return out


class ResponsesServer(_ModelServer):
    """The Responses API as Codex streams it (``POST /v1/responses``)."""

    def serves(self, path: str) -> bool:
        return path.split("?", 1)[0] == "/v1/responses"

    def stream(self, turn: ToolCall | Answer, n: int, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        if isinstance(turn, ToolCall) and isinstance(turn.input, dict):  # a function tool (exec_command)
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": turn.name,
                "arguments": json.dumps(turn.input),
                "status": "completed",
            }
        elif isinstance(turn, ToolCall):  # a freeform tool (apply_patch): its input is the text
            item = {
                "type": "custom_tool_call",
                "id": f"ctc_{n}",
                "call_id": f"call_{n}",
                "name": turn.name,
                "input": turn.input,
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        response = {"id": f"resp_{n}", "object": "response", "status": "in_progress", "output": []}
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        return [
            ("response.created", {"type": "response.created", "response": response}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {**response, "status": "completed", "output": [item], "usage": usage},
                },
            ),
        ]

    def tool_outputs(self) -> list[dict[str, Any]]:
        """Every ``custom_tool_call_output`` (or ``function_call_output``) item Codex sent back."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for body in self.model_requests():
            for item in body.get("input", []):
                if item.get("type") in ("custom_tool_call_output", "function_call_output") and (
                    item.get("call_id") not in seen
                ):
                    seen.add(item.get("call_id"))
                    out.append(item)
        return out
