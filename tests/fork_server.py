"""Server processes forked from a parent that has already imported the server.

Importing ``eventcoord serve``'s modules costs about a second of CPU, and a run starts
hundreds of servers on two cores. So each test worker keeps one parent process (this
module, run as ``python -m tests.fork_server``) that imports them once and forks a child
per server: each child is still a separate ``eventcoord serve`` process, with its own
environment, working directory, log, signals and exit code, serving real HTTP.
``EVENTCOORD_TEST_FORK=0`` starts every server with a fresh interpreter instead.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

#: What the parent imports before forking: everything ``eventcoord serve`` loads to start.
PRELOAD = (
    "eventcoord.cli",
    "eventcoord.cli.server",
    "eventcoord.api.app",
    "eventcoord.api.coalesced_writes",
    "eventcoord.api.read_deadlines",
    "eventcoord.bootstrap",
    "eventcoord.first_run",
    "eventcoord.store.sqlite",
    "eventcoord.store.postgres",
    "uvicorn",
    "uvloop",
    "httptools",
    "aiosqlite",
    "asyncpg",
    "alembic.command",
    "alembic.config",
    # what building the app and its first requests import on demand (a third of the rest)
    "litestar.plugins.pydantic",
    "litestar.plugins.attrs",
    "litestar._kwargs.kwargs_model",
    "litestar.logging.standard",
    "litestar.exceptions.responses",
    "litestar.middleware._internal.exceptions.middleware",
    "litestar.middleware.allowed_hosts",
    "litestar.middleware.csrf",
    "litestar.middleware.response_cache",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "importlib.resources.readers",
)


def enabled() -> bool:
    """Whether servers are forked (the default) or started from a fresh interpreter."""
    return os.environ.get("EVENTCOORD_TEST_FORK", "1") != "0"


class ForkedProcess:
    """A forked server as the tests see a :class:`subprocess.Popen`: pid, poll, wait, signals."""

    def __init__(self, parent: ForkParent, pid: int, args: list[str]) -> None:
        self._parent = parent
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        # Readable once the process has exited; the parent reaps it only when asked, so
        # until then the pid cannot be reused and signals reach this process.
        self._pidfd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self._reap()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._reap()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _reap(self) -> None:
        self.returncode = self._parent.reap(self.pid)
        os.close(self._pidfd)


class ForkParent:
    """This test worker's forking parent, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                root = str(Path(__file__).resolve().parent.parent)
                path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "tests.fork_server"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    cwd=root,
                    env={**os.environ, "PYTHONPATH": path},
                )
                atexit.register(self.close)
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.write(json.dumps(request).encode() + b"\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the forking parent of the test servers exited")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    def close(self) -> None:
        """End the parent (it exits when its input closes) and wait for it."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def spawn(self, args: list[str], env: dict[str, str], log_path: Path) -> ForkedProcess:
        """A child running ``eventcoord`` with ``args`` (after the program name), output to ``log_path``."""
        pid = int(self._ask({"spawn": args, "env": env, "cwd": os.getcwd(), "log": str(log_path)})["pid"])
        return ForkedProcess(self, pid, args)

    def reap(self, pid: int) -> int:
        """The exit code of ``pid``, which has exited (negative: the signal that ended it)."""
        return int(self._ask({"reap": pid})["code"])


PARENT = ForkParent()


def _child(args: list[str], env: dict[str, str], cwd: str, log: str) -> None:
    """In the forked child: become ``eventcoord <args>`` writing to ``log``; never returns."""
    code = 1
    try:
        # As a new interpreter has them (SIGPIPE stays ignored, as Python sets it at start-up).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(null)
        os.close(out)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = ["eventcoord", *args]
        from eventcoord.cli import main

        code = main(args)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        import logging

        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def serve_forks() -> None:
    """The parent: import the server, then fork a child per request read from standard input."""
    import importlib

    for name in PRELOAD:
        with contextlib.suppress(ImportError):  # a module moved: the child imports what it needs
            importlib.import_module(name)
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    while line := requests.readline():
        request = json.loads(line)
        try:
            if "reap" in request:
                _, status = os.waitpid(int(request["reap"]), 0)
                answer: dict[str, Any] = {"code": os.waitstatus_to_exitcode(status)}
            else:
                answers.flush()
                pid = os.fork()
                if pid == 0:
                    _child(request["spawn"], request["env"], request["cwd"], request["log"])
                answer = {"pid": pid}
        except Exception as e:  # told to the test that asked, which fails with it
            answer = {"error": f"{type(e).__name__}: {e}"}
        answers.write(json.dumps(answer).encode() + b"\n")
        answers.flush()


if __name__ == "__main__":
    serve_forks()
