"""How far the claim_issue row of ``bench/commands.py`` can go on this HTTP stack: the floor beside the rest.

Three servers per backend, loaded in turn by the same wrk script (``bench/commands.py``'s
claim_issue: new issues, two per new project, one connection per session), ``--rounds``
times:

* the no-op stack (``bench/noop_app.py``);
* ``eventcoord serve``;
* the floor (``bench/floor_app.py``): the no-op stack plus the claim's own statements in
  the writer's batches, and no other Python (no auth, no command model, no decision, no
  events, no projections, no metrics, no retries).

Each line gives req/s and the server's CPU per request; the summary gives each server's
ratio to the no-op run beside it (the median of the rounds) against its target
(docs/decisions/0004-the-floor.md).

    .venv/bin/python bench/floor.py --rounds 3
    .venv/bin/python bench/floor.py --db postgresql+asyncpg://postgres@127.0.0.1:5432 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import command_path as cp  # the shared harness: servers, CPU accounting
import commands  # the claim_issue wrk script and the wrk runner

NAMES = ("no-op", "eventcoord", "floor")


def start_floor(data: Path, db_url: str | None, port: int, writers: int) -> cp.Server:
    """The floor on the store ``eventcoord serve`` migrated: ``db_url``, else SQLite in ``data``."""
    where = ["--pg", db_url.replace("+asyncpg", ""), "--writers", str(writers)] if db_url else []
    where = where or ["--sqlite", str(data / "eventcoord.db")]
    server = cp.Server("floor", [cp.PYTHON, str(cp.BENCH / "floor_app.py"), *where, "--port", str(port)], port)
    server.wait_ready()
    return server


def run_backend(args: argparse.Namespace, backend: str, ec_url: str | None, floor_url: str | None) -> None:
    """The three servers on one backend, in turn, ``--rounds`` times; then the summary."""
    work = Path(tempfile.mkdtemp(prefix="eventcoord-bench-floor-"))
    runs: dict[str, list[commands.Load]] = {name: [] for name in NAMES}
    try:
        with contextlib.ExitStack() as stack:
            # The floor's store: migrated and given its sessions by eventcoord serve, then handed over.
            prep = cp.start_eventcoord(work / "floor", cp.free_port(), floor_url, None, log=work / "prep.log")
            floor_sessions = cp.register_sessions(prep.base, args.connections)
            prep.stop()
            noop = cp.start_noop(cp.free_port(), None)
            stack.callback(noop.stop)
            ec = cp.start_eventcoord(work / "ec", cp.free_port(), ec_url, None, log=work / "eventcoord.log")
            stack.callback(ec.stop)
            ec_sessions = cp.register_sessions(ec.base, args.connections)
            floor = start_floor(work / "floor", floor_url, cp.free_port(), args.floor_writers)
            stack.callback(floor.stop)
            servers = {"no-op": (noop, ec_sessions), "eventcoord": (ec, ec_sessions), "floor": (floor, floor_sessions)}
            for name, (server, sessions) in servers.items():
                if args.warmup > 0:
                    script = commands.lua(work / f"warm-{name}.lua", sessions, "claim_issue")
                    commands.wrk([server], script, args.connections, args.warmup, "warmup")
            for _ in range(args.rounds):
                for name, (server, sessions) in servers.items():
                    if args.quiet_wait > 0:
                        cp.wait_quiet(args.quiet_below, args.quiet_wait)
                    script = commands.lua(work / f"{name}.lua", sessions, "claim_issue")
                    load = commands.wrk([server], script, args.connections, args.duration, name)
                    runs[name].append(load)
                    note = f"  ratio {load.rps / runs['no-op'][-1].rps:.3f}" if name != "no-op" else ""
                    commands.show(backend, load, note)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"claim_issue on {backend}, medians of {args.rounds} rounds [target {commands.TARGET[backend]}]:")
    for name in NAMES:
        ratios = [r.rps / n.rps for r, n in zip(runs[name], runs["no-op"], strict=True)]
        cpu = statistics.median(r.server_cpu_us for r in runs[name])
        cores = statistics.median(r.server_cores for r in runs[name])
        rest = statistics.median(r.rest_cores for r in runs[name])
        ratio = f"ratio {statistics.median(ratios):.2f}" if name != "no-op" else "          "
        print(
            f"  {backend:<10} {name:<11} {ratio}   {statistics.median(r.rps for r in runs[name]):7.0f} req/s   "
            f"server {cpu:4.0f} us CPU per request ({cores:.2f} cores, rest {rest:.2f})",
            flush=True,
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--db", help="postgresql+asyncpg://user@host:port: also run on PostgreSQL (fresh databases)")
    p.add_argument("--only", choices=("sqlite", "postgresql"), help="run one backend only")
    p.add_argument("--floor-writers", type=int, default=1, help="PostgreSQL: the floor's batches in flight")
    commands.add_run_options(p, duration=6, rounds=3, rounds_of="rounds of the three runs")
    args = p.parse_args()
    if shutil.which("wrk") is None:
        print("wrk not found: apt-get install -y wrk", file=sys.stderr)
        return 2
    for backend in ("sqlite", "postgresql"):
        if args.only not in (None, backend) or (backend == "postgresql" and not args.db):
            continue
        with contextlib.ExitStack() as stack:
            urls = (
                [stack.enter_context(cp.fresh_postgres(args.db)) for _ in range(2)] if backend == "postgresql" else []
            )
            run_backend(args, backend, *(urls or [None, None]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
