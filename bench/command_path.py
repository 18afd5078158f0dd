"""Command path vs. the same HTTP stack with a no-op handler, measured side by side.

Starts ``bench/noop_app.py`` and ``eventcoord serve`` (a fresh data folder, SQLite by
default; ``--db postgresql+asyncpg://user@host:port`` makes a fresh PostgreSQL database),
registers ``--sessions`` sessions, then loads both servers with ``wrk`` and the same Lua
script (POST /v1/commands with heartbeat_agent bodies rotating over the sessions, the same
headers, connections and duration), alternating no-op / command rounds. Prints each round,
the medians and the ratio command/no-op; the issue asks for a ratio of at least 0.5.

    .venv/bin/python bench/command_path.py                       # SQLite, 3 rounds of 10 s
    .venv/bin/python bench/command_path.py --pin split           # servers on CPU 0, wrk on CPU 1
    .venv/bin/python bench/command_path.py --db postgresql+asyncpg://postgres@127.0.0.1:5432

Needs ``wrk`` on PATH (``apt-get install -y wrk``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PYTHON = sys.executable
EVENTCOORD = str(Path(PYTHON).with_name("eventcoord"))
TOKEN = "bench-token"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def baseline_tree(rev: str, tmp: Path) -> Path:
    """``git archive`` of ``rev`` with its own projections/ and migrations/ importable first."""
    root = Path(__file__).resolve().parent.parent
    archive = subprocess.run(["git", "archive", rev], cwd=root, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    # The editable install maps eventcoord.projections/migrations to *this* checkout; links
    # inside the extracted package are found first, so the baseline runs its own (a revision
    # that ships the links already has them).
    for name in ("projections", "migrations"):
        link = tmp / "src" / "eventcoord" / name
        if not link.is_symlink():
            link.symlink_to(tmp / name)
    return tmp / "src"


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def taskset(cpus: str | None) -> list[str]:
    """The ``taskset`` prefix pinning a command to ``cpus`` (none when ``cpus`` is None)."""
    return ["taskset", "-c", cpus] if cpus else []


class Server:
    """A server process we started: readiness, CPU accounting, stop."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        port: int,
        *,
        env: dict[str, str] | None = None,
        cpus: str | None = None,
        log: Path | None = None,
    ) -> None:
        self.name = name
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self._log = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            [*taskset(cpus), *argv],
            env={**os.environ, **(env or {})},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.base + "/health", timeout=1.0).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready after {timeout} s")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the whole process (all its threads)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()  # type: ignore[union-attr]


def start_eventcoord(
    data_dir: Path,
    port: int,
    db_url: str | None,
    cpus: str | None,
    log: Path | None = None,
    serve: Sequence[str] | None = None,
) -> Server:
    """``eventcoord serve`` on ``data_dir`` (or ``db_url``), NATS off, bootstrap token set.

    ``serve`` replaces the ``eventcoord serve`` command (e.g. a patched build to compare)."""
    argv = [*(serve or [EVENTCOORD, "serve"]), "--data-dir", str(data_dir), "--nats", "off", "--port", str(port)]
    if db_url:
        argv += ["--db", db_url]
    server = Server(
        "eventcoord",
        argv,
        port,
        env={"EVENTCOORD_BOOTSTRAP_TOKEN": TOKEN, "EVENTCOORD_RATE_LIMITS": "off"},
        cpus=cpus,
        log=log,
    )
    server.wait_ready()
    return server


def start_noop(port: int, cpus: str | None) -> Server:
    """``bench/noop_app.py``: the same stack with a no-op handler."""
    server = Server("noop", [PYTHON, str(BENCH / "noop_app.py"), "--port", str(port)], port, cpus=cpus)
    server.wait_ready()
    return server


def post_command(base: str, body: dict[str, Any], client: httpx.Client | None = None) -> dict[str, Any]:
    """One command; raises on anything but 200."""
    c = client or httpx.Client()
    r = c.post(f"{base}/v1/commands", json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30.0)
    if r.status_code != 200:
        raise RuntimeError(f"{body.get('type')} answered {r.status_code}: {r.text}")
    answer: dict[str, Any] = r.json()
    return answer


def register_sessions(base: str, n: int) -> list[str]:
    """Register ``n`` agent sessions; their ids."""
    with httpx.Client() as client:
        return [
            post_command(base, {"type": "register_agent", "actor": f"bench-{i}", "host": "bench"}, client)["result"][
                "session_id"
            ]
            for i in range(n)
        ]


def head(base: str) -> int:
    """The log's head position, from /health."""
    return int(httpx.get(base + "/health", timeout=5.0).json()["head"])


# --------------------------------------------------------------------------- wrk

_LUA = (
    r"""
-- Generated by bench/command_path.py: POST /v1/commands rotating over sessions.
local sessions = {%(sessions)s}
local n = #sessions
local register_every = %(register_every)d
local with_command_id = %(command_id)s
local nonce = "%(nonce)s"
local headers = {["Authorization"] = "Bearer %(token)s", ["Content-Type"] = "application/json"}
local threads = 0
local i = 0

function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  i = (tid or 0) * 7919
end

function request()
  i = i + 1
  local body
  if register_every > 0 and i %% register_every == 0 then
    body = '{"type":"register_agent","actor":"bench-load","host":"bench"'
  else
    body = '{"type":"heartbeat_agent","session_id":"' .. sessions[(i %% n) + 1] .. '"'
  end
  if with_command_id then
    body = body .. ',"command_id":"' .. nonce .. '-' .. (tid or 0) .. '-' .. i .. '"'
  end
  return wrk.format("POST", "/v1/commands", headers, body .. "}")
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%%d,"duration_us":%%d,"bytes":%%d,"connect":%%d,"read":%%d,"write":%%d,"""
    r""""status":%%d,"timeout":%%d,' ..
    '"mean_us":%%.1f,"p50_us":%%d,"p90_us":%%d,"p99_us":%%d,"max_us":%%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
"""
)


def write_lua(path: Path, sessions: Sequence[str], *, register_every: int = 0, command_id: bool = False) -> Path:
    """The wrk script; a fresh nonce per file keeps command ids unique across runs."""
    path.write_text(
        _LUA
        % {
            "sessions": ",".join(f'"{s}"' for s in sessions),
            "register_every": register_every,
            "command_id": "true" if command_id else "false",
            "nonce": uuid.uuid4().hex[:12],
            "token": TOKEN,
        }
    )
    return path


@dataclass
class Run:
    """One wrk run against one server."""

    kind: str
    rps: float
    requests: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    errors: dict[str, int]
    server_cpu_us_per_req: float
    extra: dict[str, Any] = field(default_factory=dict)


def system_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (from /proc/stat)."""
    parts = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in parts[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def wait_quiet(below: float, timeout: float) -> float:
    """Wait (up to ``timeout`` s) until the machine's busy cores over one second drop below
    ``below``: other processes on a shared 2-core machine skew a run. Returns the busy
    cores seen last (call it while our own servers are idle)."""
    deadline = time.monotonic() + timeout
    while True:
        b0 = system_busy_seconds()
        time.sleep(1.0)
        busy = system_busy_seconds() - b0
        if busy < below or time.monotonic() >= deadline:
            return busy


def run_wrk(
    server: Server, lua: Path, *, connections: int, duration: int, threads: int, cpus: str | None, kind: str
) -> Run:
    """Load ``server`` with wrk for ``duration`` seconds; requests/s, latency, CPU shares."""
    argv = [
        *taskset(cpus),
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, duration)}s",
        "--timeout",
        "10s",
        "-s",
        str(lua),
        server.base + "/v1/commands",
    ]
    cpu0, busy0, t0 = server.cpu_seconds(), system_busy_seconds(), time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    cpu1, busy1, wall = server.cpu_seconds(), system_busy_seconds(), time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {err or out}")
    line = next((x for x in out.splitlines() if x.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary:\n{out}")
    s = json.loads(line[8:])
    requests = int(s["requests"])
    errors = {k: int(s[k]) for k in ("connect", "read", "write", "status", "timeout") if int(s[k])}
    server_cpu = cpu1 - cpu0
    return Run(
        kind=kind,
        rps=requests / (s["duration_us"] / 1e6),
        requests=requests,
        p50_ms=s["p50_us"] / 1000,
        p90_ms=s["p90_us"] / 1000,
        p99_ms=s["p99_us"] / 1000,
        mean_ms=s["mean_us"] / 1000,
        errors=errors,
        server_cpu_us_per_req=server_cpu / max(requests, 1) * 1e6,
        extra={
            "server_cores": round(server_cpu / wall, 2),
            # Busy CPU of the whole machine not spent by the server: wrk, the kernel's
            # network stack, and anything else running (other cores' users).
            "rest_cores": round((busy1 - busy0 - server_cpu) / wall, 2),
        },
    )


def fmt_run(r: Run) -> str:
    errs = " errors=" + json.dumps(r.errors) if r.errors else ""
    return (
        f"{r.kind:<8} {r.rps:>9.0f} req/s  p50 {r.p50_ms:6.2f} ms  p90 {r.p90_ms:6.2f} ms  "
        f"p99 {r.p99_ms:6.2f} ms  server {r.server_cpu_us_per_req:5.0f} us CPU/req "
        f"({r.extra.get('server_cores', 0):.2f} cores, rest of machine {r.extra.get('rest_cores', 0):.2f}){errs}"
    )


# ------------------------------------------------------------------------ profile


def batching(base: str) -> dict[str, float]:
    """The store's writer counters, from /metrics (average batch, rollbacks, re-decided)."""
    text = httpx.get(base + "/metrics", timeout=5.0).text
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("eventcoord_store_") and "_created" not in line:
            name, _, value = line.partition(" ")
            values[name.removeprefix("eventcoord_store_").removesuffix("_total")] = float(value)
    if values.get("batches"):
        values["average_batch"] = round(values.get("batched", 0) / values["batches"], 1)
    return values


def py_spy() -> str | None:
    """The py-spy binary (``.venv/bin/pip install py-spy``), if installed."""
    beside = Path(PYTHON).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def start_profile(pid: int, seconds: int, out: Path, rate: int = 200, gil: bool = False) -> subprocess.Popen[bytes]:
    """``py-spy record`` of every thread of ``pid`` as collapsed stacks (raw format).

    py-spy counts a thread blocked on a lock or a queue as busy; ``gil`` keeps only the
    samples of the thread holding the GIL, i.e. where the interpreter's time goes."""
    spy = py_spy()
    if spy is None:
        raise RuntimeError("py-spy not found: .venv/bin/pip install py-spy")
    argv = [
        spy,
        "record",
        "--format",
        "raw",
        "--threads",
        "-r",
        str(rate),
        "-d",
        str(seconds),
        "-o",
        str(out),
        "-p",
        str(pid),
    ]
    if gil:
        argv.append("--gil")
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _frame_name(frame: str) -> str:
    """``fn (path/file.py:12)`` -> ``fn (path/file.py)``: lines merged."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit(':', 1)[0]})" if where else name


def summarize_profile(path: Path, top: int = 30) -> str:
    """Share of samples per thread, and the top functions inclusive and self."""
    total = 0
    threads: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        thread = frames[0].split(": ", 1)[-1].strip() if frames[0].startswith("thread") else "?"
        thread = thread.split("_")[0] if thread.startswith("eventcoord-writer") else thread
        threads[thread] = threads.get(thread, 0) + n
        names = [_frame_name(f) for f in frames[1:]]
        for name in set(names):
            inclusive[name] = inclusive.get(name, 0) + n
        if names:
            own[names[-1]] = own.get(names[-1], 0) + n
    if not total:
        return "no samples"
    lines = [f"{total} samples (all threads, idle excluded)", "threads:"]
    lines += [f"  {100 * n / total:5.1f}%  {t}" for t, n in sorted(threads.items(), key=lambda x: -x[1])]
    lines.append("inclusive (a function and what it calls):")
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in sorted(inclusive.items(), key=lambda x: -x[1])[:top]]
    lines.append("self (the function's own code):")
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in sorted(own.items(), key=lambda x: -x[1])[: top // 2]]
    return "\n".join(lines)


# --------------------------------------------------------------------- PostgreSQL


@contextlib.contextmanager
def fresh_postgres(url: str, keep: bool = False) -> Iterator[str]:
    """A fresh database on the server of ``url``; yields its URL, drops it afterwards."""
    import asyncio

    import asyncpg
    from sqlalchemy.engine import make_url

    base = make_url(url)
    name = f"eventcoord_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = base.set(drivername="postgresql", database=base.database or "postgres")

    async def sql(statement: str) -> None:
        conn = await asyncpg.connect(admin.render_as_string(hide_password=False))
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(sql(f'CREATE DATABASE "{name}"'))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        if not keep:
            asyncio.run(sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


# --------------------------------------------------------------------------- main


def pinning(mode: str) -> tuple[str | None, str | None]:
    """CPU lists of (servers, wrk) for a pin mode."""
    if mode == "split":
        return "0", "1"
    if mode == "none":
        return None, None
    servers, _, load = mode.partition("/")
    return servers or None, load or None


def median_run(runs: list[Run]) -> Run:
    """The run with the median requests/s."""
    return sorted(runs, key=lambda r: r.rps)[len(runs) // 2]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--db", help="postgresql+asyncpg://user@host:port[/db]: run on a fresh PostgreSQL database")
    p.add_argument("--sessions", type=int, default=256, help="sessions the heartbeats rotate over (default 256)")
    p.add_argument("--connections", type=int, default=64, help="wrk connections (default 64)")
    p.add_argument("--threads", type=int, default=1, help="wrk threads (default 1)")
    p.add_argument("--duration", type=int, default=10, help="seconds per run (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="seconds of warm-up per server (default 3)")
    p.add_argument("--rounds", type=int, default=3, help="no-op/command round pairs (default 3)")
    p.add_argument("--pin", default="none", help="none | split (servers CPU 0, wrk CPU 1) | SERVERS/WRK cpu lists")
    p.add_argument("--register-every", type=int, default=0, help="every Nth request is register_agent (0: none)")
    p.add_argument("--command-id", action="store_true", help="send a unique command_id with every command")
    p.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    p.add_argument(
        "--profile",
        type=Path,
        help="py-spy the eventcoord server during the first command round; raw stacks to this file",
    )
    p.add_argument("--profile-gil", action="store_true", help="profile only the thread holding the GIL (py-spy --gil)")
    p.add_argument(
        "--quiet-below",
        type=float,
        default=0.3,
        help="before each run wait until other load is below this many cores (default 0.3)",
    )
    p.add_argument(
        "--quiet-wait", type=float, default=30.0, help="... but at most this many seconds (default 30; 0 disables)"
    )
    p.add_argument("--keep", action="store_true", help="keep the data folder / database")
    p.add_argument(
        "--serve-cmd", help="command replacing 'eventcoord serve' (same options), e.g. to measure a patched build"
    )
    args = p.parse_args(argv)
    if shutil.which("wrk") is None:
        print("wrk not found: apt-get install -y wrk", file=sys.stderr)
        return 2
    server_cpus, load_cpus = pinning(args.pin)
    work = Path(tempfile.mkdtemp(prefix="eventcoord-bench-"))
    with contextlib.ExitStack() as stack:
        db_url = stack.enter_context(fresh_postgres(args.db, args.keep)) if args.db else None
        if not args.keep:
            stack.callback(shutil.rmtree, work, True)
        noop = start_noop(free_port(), server_cpus)
        stack.callback(noop.stop)
        serve = args.serve_cmd.split() if args.serve_cmd else None
        ec = start_eventcoord(work / "data", free_port(), db_url, server_cpus, log=work / "eventcoord.log", serve=serve)
        stack.callback(ec.stop)
        backend = "postgresql" if db_url else "sqlite"
        sessions = register_sessions(ec.base, args.sessions)
        lua = write_lua(work / "load.lua", sessions, register_every=args.register_every, command_id=args.command_id)
        common = {
            "connections": args.connections,
            "duration": args.duration,
            "threads": args.threads,
            "cpus": load_cpus,
        }
        print(
            f"backend={backend} sessions={args.sessions} connections={args.connections} wrk-threads={args.threads} "
            f"duration={args.duration}s rounds={args.rounds} pin={args.pin} register-every={args.register_every} "
            f"command-id={args.command_id} nproc={os.cpu_count()} python={sys.version.split()[0]}",
            flush=True,
        )
        if args.warmup > 0:
            for server in (noop, ec):
                run_wrk(server, lua, **{**common, "duration": args.warmup}, kind="warmup")  # type: ignore[arg-type]
        head_before = head(ec.base)
        runs: dict[str, list[Run]] = {"noop": [], "command": []}
        for round_no in range(args.rounds):
            for kind, server in (("noop", noop), ("command", ec)):
                lua = write_lua(
                    work / "load.lua", sessions, register_every=args.register_every, command_id=args.command_id
                )
                if args.quiet_wait > 0:
                    wait_quiet(args.quiet_below, args.quiet_wait)
                spy = None
                if args.profile and kind == "command" and round_no == 0:
                    spy = start_profile(ec.pid, max(1, args.duration - 1), args.profile, gil=args.profile_gil)
                r = run_wrk(server, lua, **common, kind=kind)  # type: ignore[arg-type]
                if spy is not None:
                    spy.wait()
                    r.extra["profiled"] = True
                runs[kind].append(r)
                print(fmt_run(r) + ("  [profiled]" if spy else ""), flush=True)
        appended = head(ec.base) - head_before
        answered = sum(r.requests for r in runs["command"])
        med = {k: statistics.median(r.rps for r in v) for k, v in runs.items()}
        ratio = med["command"] / med["noop"]
        # Each command run against the no-op run just before it: robust to drifting load.
        pairs = [c.rps / n.rps for n, c in zip(runs["noop"], runs["command"], strict=True)]
        print(
            f"median   noop {med['noop']:.0f} req/s   command {med['command']:.0f} req/s   "
            f"ratio {ratio:.3f} (target >= 0.5)"
        )
        print("ratio per round: " + ", ".join(f"{x:.3f}" for x in pairs) + f"   median {statistics.median(pairs):.3f}")
        for kind in runs:
            print("median " + fmt_run(median_run(runs[kind])))
        print(f"events appended during the command runs: {appended} (responses counted by wrk: {answered})")
        if args.profile:
            print(f"\nprofile of the eventcoord server ({args.profile}):\n" + summarize_profile(args.profile))
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "backend": backend,
                        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                        "nproc": os.cpu_count(),
                        "python": sys.version.split()[0],
                        "runs": {k: [asdict(r) for r in v] for k, v in runs.items()},
                        "median_rps": med,
                        "ratio": ratio,
                        "round_ratios": pairs,
                        "appended": appended,
                    },
                    indent=2,
                )
            )
        if args.keep:
            print(f"kept {work}" + (f" and {db_url}" if db_url else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
