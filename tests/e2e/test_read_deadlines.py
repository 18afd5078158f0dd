"""Slow clients are cut (slowloris): a request's headers and body each have a deadline.

A real server with short deadlines (1 s for the headers, 1 s for the body) and real
sockets: connections sending their headers or their body a byte at a time, or nothing at
all, are answered 408 ``REQUEST_TIMEOUT`` (when a byte came) and closed, while ordinary
requests on other connections are answered meanwhile and afterwards.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.helpers import BOOTSTRAP, ServerProcess

DEADLINES = {"EVENTCOORD_HEADER_TIMEOUT_SECONDS": "1", "EVENTCOORD_BODY_TIMEOUT_SECONDS": "1"}
#: How long a test waits for the server to close a slow connection (far beyond the deadlines).
PATIENCE = 20.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    s = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/eventcoord.db", tmp_path / "data", extra_env=DEADLINES)
    try:
        yield s
    finally:
        s.stop()


class SlowClient:
    """One connection that sends ``head`` (then ``body``) a byte at a time until the server closes it."""

    def __init__(self, port: int, head: bytes, body: bytes = b"", pace: float = 0.1) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(PATIENCE)
        self.head, self.body, self.pace = head, body, pace
        self.stop = threading.Event()
        self.sender = threading.Thread(target=self._send, daemon=True)
        self.sender.start()

    def _send(self) -> None:
        data = self.head + self.body
        sent_head = len(self.head) if self.body else 0
        try:
            if sent_head:
                self.sock.sendall(self.head)  # the headers at once: only the body is slow
            for i in range(sent_head, len(data)):
                if self.stop.wait(self.pace):
                    return
                self.sock.sendall(data[i : i + 1])
            self.stop.wait(PATIENCE)  # everything sent, slowly: hold the connection open
        except OSError:
            return  # the server closed it

    def answer(self) -> bytes:
        """Everything the server sends until it closes the connection (fails if it never does)."""
        chunks = []
        try:
            while chunk := self.sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
        except TimeoutError:
            raise AssertionError(f"the server kept a slow connection open for {PATIENCE} s") from None
        finally:
            self.stop.set()
            self.sock.close()
        return b"".join(chunks)


def _timed_out(answer: bytes) -> None:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b"connection: close" in head.lower(), head
    assert json.loads(body)["error"]["code"] == "REQUEST_TIMEOUT", body


def _healthy(server: ServerProcess) -> None:
    r = httpx.get(server.base_url + "/health", timeout=PATIENCE)
    assert r.status_code == 200, r.text


def test_headers_sent_a_byte_at_a_time_are_cut_while_others_are_answered(server: ServerProcess) -> None:
    head = b"GET /v1/agents HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"y" * 20) for i in range(40))
    slow = [SlowClient(server.port, head) for _ in range(20)]
    _healthy(server)  # the slow ones wait for their deadline; everyone else is answered
    for client in slow:
        _timed_out(client.answer())
    _healthy(server)


def test_a_body_sent_a_byte_at_a_time_is_cut(server: ServerProcess) -> None:
    body = json.dumps({"type": "register_agent", "actor": "slow"}).encode()
    head = (
        b"POST /v1/commands HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        b"authorization: Bearer " + BOOTSTRAP.encode() + b"\r\ncontent-length: %d\r\n\r\n" % (len(body) + 100)
    )
    slow = SlowClient(server.port, head, body + b" " * 100)
    _healthy(server)
    _timed_out(slow.answer())
    _healthy(server)
    agents = httpx.get(server.base_url + "/v1/agents", headers={"authorization": f"Bearer {BOOTSTRAP}"}, timeout=30)
    assert agents.json()["agents"] == [], "a command whose body never arrived was not decided"


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(server: ServerProcess) -> None:
    idle = SlowClient(server.port, b"")
    assert idle.answer() == b""
    _healthy(server)


def _read_answer(sock: socket.socket) -> bytes:
    """One whole answer (headers and a ``content-length`` body) from a kept-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_a_kept_alive_connection_idle_between_requests_is_not_cut(server: ServerProcess) -> None:
    """The header deadline runs from a request's first byte: a pause between requests
    (longer than the deadline, shorter than keep-alive) costs the connection nothing."""
    request = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(PATIENCE)
        sock.sendall(request)
        assert _read_answer(sock).startswith(b"HTTP/1.1 200")
        time.sleep(2.0)  # twice the header deadline, within uvicorn's 5 s keep-alive
        sock.sendall(request)
        assert _read_answer(sock).startswith(b"HTTP/1.1 200")
