"""One HTTP/1.1 request on a fresh connection, within a deadline, on the standard library's socket.

For the commands a harness or git runs at every step (``hook claude|codex``, the
pre-commit gate): importing ``http.client`` (with ``email`` and ``ssl``) costs more than
starting the interpreter, while one request with ``Connection: close`` needs only a socket.
``ssl`` (and ``socket``, whose enums cost ten times the C module ``_socket`` it wraps) is
imported for an ``https`` URL only. The whole exchange — connecting, sending,
reading the answer — must finish by the deadline, else ``TimeoutError``.
"""

from __future__ import annotations

import _socket
import time

#: The largest answer read (a hook's answer is a few kilobytes; the file claims a few megabytes).
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class BadAnswer(ValueError):
    """The peer answered something that is not an HTTP/1.x response (or closed mid-answer)."""


def split_url(url: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, target)`` of ``http(s)://host[:port][/path][?query]``; target is what follows."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {url!r}")
    rest = rest.split("#", 1)[0]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, target = rest[:cut], rest[cut:]
    if "@" in netloc:
        raise ValueError(f"credentials in the URL are not supported (use the token): {url!r}")
    if netloc.startswith("["):  # [::1]:8765
        host, _, tail = netloc[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else tail
    else:
        host, _, port_text = netloc.partition(":")
    if not host:
        raise ValueError(f"no host in the URL: {url!r}")
    if port_text and not (port_text.isdigit() and 0 < int(port_text) < 65536):
        raise ValueError(f"not a port number in the URL: {url!r}")
    port = int(port_text) if port_text else (443 if scheme == "https" else 80)
    return scheme, host, port, target if target.startswith("/") else "/" + target


class _Reader:
    """Bytes from a socket, each receive bounded by what is left of the deadline."""

    def __init__(self, sock: _socket.socket, deadline: float) -> None:
        self.sock, self.deadline, self.buf, self.total = sock, deadline, b"", 0

    def fill(self) -> bool:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no complete answer before the deadline")
        self.sock.settimeout(left)
        data = self.sock.recv(65536)
        self.total += len(data)
        if self.total > MAX_ANSWER_BYTES:
            raise BadAnswer(f"answer larger than {MAX_ANSWER_BYTES} bytes")
        self.buf += data
        return bool(data)

    def until(self, sep: bytes) -> bytes:
        while sep not in self.buf:
            if not self.fill():
                raise BadAnswer("connection closed in the middle of the answer")
        head, _, self.buf = self.buf.partition(sep)
        return head

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self.fill():
                raise BadAnswer("connection closed in the middle of the answer")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def rest(self) -> bytes:
        while self.fill():
            pass
        out, self.buf = self.buf, b""
        return out


def _status_and_headers(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise BadAnswer(f"not an HTTP answer: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


def _body(reader: _Reader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        while True:
            size_text = reader.until(b"\r\n").split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise BadAnswer(f"bad chunk size {size_text[:20]!r}") from None
            if size == 0:
                return b"".join(chunks)
            chunks.append(reader.exactly(size))
            reader.until(b"\r\n")
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise BadAnswer(f"bad content-length {length[:20]!r}")
        return reader.exactly(int(length))
    return reader.rest()


def request(method: str, url: str, token: str, body: bytes | None = None, timeout: float = 2.0) -> tuple[int, bytes]:
    """Send one request to ``url`` (bearer ``token`` unless empty); ``(status, body)`` of the answer.

    Raises ``OSError`` (``TimeoutError`` past ``timeout`` seconds in all, ``ConnectionError``
    and the like when no server answers), ``BadAnswer`` for a garbled answer and ``ValueError``
    for a URL or token that cannot be sent.
    """
    deadline = time.monotonic() + timeout
    scheme, host, port, target = split_url(url)
    if any(c in token for c in "\r\n\0") or any(c in target for c in " \r\n\0"):
        raise ValueError("the token or the URL holds a character a request line or header cannot carry")
    host_header = f"[{host}]" if ":" in host else host
    if port != (443 if scheme == "https" else 80):
        host_header += f":{port}"
    lines = [
        f"{method} {target} HTTP/1.1",
        f"Host: {host_header}",
        "Connection: close",
        "User-Agent: eventcoord",
        "Accept: application/json",
    ]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    message = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
    sock = _connect(scheme, host, port, deadline)
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.sendall(message)
        reader = _Reader(sock, deadline)
        status, headers = _status_and_headers(reader.until(b"\r\n\r\n"))
        while 100 <= status < 200:  # an interim answer: the real one follows
            status, headers = _status_and_headers(reader.until(b"\r\n\r\n"))
        return status, _body(reader, headers)
    finally:
        sock.close()


def _connect(scheme: str, host: str, port: int, deadline: float) -> _socket.socket:
    """A connected socket (TLS-wrapped for https), trying each address the name resolves to."""
    left = max(deadline - time.monotonic(), 0.001)
    if scheme == "https":
        import socket
        import ssl

        plain = socket.create_connection((host, port), timeout=left)
        return ssl.create_default_context().wrap_socket(plain, server_hostname=host)
    # An ASCII name as bytes: a str would be encoded with the idna codec, one more import.
    name: str | bytes = host.encode("ascii") if host.isascii() else host
    problem: OSError = OSError(f"{host} resolves to no address")
    for family, kind, proto, _, address in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock.connect(address)
            return sock
        except OSError as e:
            sock.close()
            problem = e
    raise problem
