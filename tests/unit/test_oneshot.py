"""``client.oneshot``: one HTTP/1.1 exchange on a socket, as the hook command and the CLI send it,
against real servers on loopback that answer in each way HTTP allows (and some it does not)."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eventcoord.client.oneshot import BadAnswer, request, split_url

Answerer = Callable[[socket.socket, bytes], None]


class Peer:
    """A loopback server that reads one request (head and body) and answers it with ``answer``."""

    def __init__(self, answer: Answerer, tls: ssl.SSLContext | None = None) -> None:
        self.answer, self.tls = answer, tls
        self.requests: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            try:
                if self.tls is not None:
                    conn = self.tls.wrap_socket(conn, server_side=True)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head = data.split(b"\r\n\r\n", 1)[0].lower()
                if b"content-length:" in head:
                    length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
                    while len(data.split(b"\r\n\r\n", 1)[1]) < length:
                        data += conn.recv(65536)
                self.requests.append(data)
                self.answer(conn, data)
            except OSError:
                pass
            finally:
                conn.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def peers() -> Iterator[list[Peer]]:
    made: list[Peer] = []
    yield made
    for p in made:
        p.close()


def serve(peers: list[Peer], answer: Answerer, tls: ssl.SSLContext | None = None) -> Peer:
    p = Peer(answer, tls)
    peers.append(p)
    return p


def test_the_request_carries_method_path_token_and_body_and_the_answer_comes_back(peers: list[Peer]) -> None:
    p = serve(peers, lambda c, _: c.sendall(b'HTTP/1.1 201 Created\r\nContent-Length: 7\r\n\r\n{"a":1}trailing'))
    status, body = request("POST", f"http://127.0.0.1:{p.port}/v1/hooks/claude?x=1", "tok", b'{"k": "v"}')
    assert (status, body) == (201, b'{"a":1}')  # exactly content-length bytes
    head, sent = p.requests[0].split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/hooks/claude?x=1 HTTP/1.1"
    assert f"Host: 127.0.0.1:{p.port}" in lines and "Authorization: Bearer tok" in lines
    assert "Connection: close" in lines and "Content-Length: 10" in lines and sent == b'{"k": "v"}'
    p2 = serve(peers, lambda c, _: c.sendall(b"HTTP/1.1 200 OK\r\n\r\n"))
    request("GET", f"http://localhost:{p2.port}", "")
    assert b"authorization" not in p2.requests[0].lower() and p2.requests[0].startswith(b"GET / HTTP/1.1\r\n")


def test_chunked_interim_and_until_close_answers_are_read_whole(peers: list[Peer]) -> None:
    chunked = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'
    p = serve(peers, lambda c, _: [c.sendall(chunked[i : i + 5]) for i in range(0, len(chunked), 5)])
    assert request("GET", f"http://127.0.0.1:{p.port}/", "") == (200, b'{"a":1}')
    interim = serve(peers, lambda c, _: c.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\n\r\nno"))
    assert request("GET", f"http://127.0.0.1:{interim.port}/", "") == (404, b"no")


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP answer"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "closed in the middle"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad content-length"),
        (b"", "closed in the middle"),
    ],
)
def test_a_garbled_answer_is_a_bad_answer(peers: list[Peer], answer: bytes, problem: str) -> None:
    p = serve(peers, lambda c, _: c.sendall(answer))
    with pytest.raises(BadAnswer, match=problem):
        request("GET", f"http://127.0.0.1:{p.port}/", "")


def test_the_deadline_bounds_the_whole_exchange_not_each_read(peers: list[Peer]) -> None:
    def trickle(conn: socket.socket, _: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(100):  # a byte every 0.1 s: each read succeeds, the whole never comes in time
            conn.sendall(b"x")
            time.sleep(0.1)

    p = serve(peers, trickle)
    with pytest.raises(TimeoutError):
        request("GET", f"http://127.0.0.1:{p.port}/", "", timeout=0.5)


def test_no_server_is_an_os_error_and_a_bad_url_or_token_a_value_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(ConnectionRefusedError):
            request("GET", f"http://127.0.0.1:{port}/", "")
    with pytest.raises(ValueError, match="header cannot carry"):
        request("GET", "http://127.0.0.1:9/", "tok\r\nX-Injected: 1")
    for url in ("ftp://h/", "http://", "http://h:0/", "http://h:x/", "http://user@h/"):
        with pytest.raises(ValueError):
            split_url(url)
    assert split_url("HTTP://[::1]:8765/a/b?c=1#f") == ("http", "::1", 8765, "/a/b?c=1")
    assert split_url("https://coord.example") == ("https", "coord.example", 443, "/")


def test_https_is_verified_against_the_trusted_certificates(
    peers: list[Peer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subject = ["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"]
    made = ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *subject, *made],
        check=True,
        capture_output=True,
    )
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    p = serve(peers, lambda c, _: c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"), tls)
    with pytest.raises(ssl.SSLCertVerificationError):  # not trusted: refused, never read
        request("GET", f"https://localhost:{p.port}/", "")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert request("GET", f"https://localhost:{p.port}/", "tok") == (200, b"{}")
    assert b"Authorization: Bearer tok" in p.requests[-1]
