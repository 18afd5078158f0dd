"""Commands with and without the hash chain's chainer, side by side in one run.

    .venv/bin/python bench/chain_overhead.py [--db postgresql+asyncpg://postgres@127.0.0.1:5432]

For each backend, each round starts ``eventcoord serve`` twice on a fresh store — once with
the chainer switched off in the process (the command path as it was before the chain: the
commands themselves never touch it), once as shipped — and loads each with the same wrk
scripts as ``bench/commands.py`` (heartbeat_agent, claim_issue). It prints req/s, p99 and
server CPU per command of both (the server process's own: the chainer's child is not in it),
the medians' ratios, and how far the chain was behind the head when the loaded run ended and
a second later (the chainer keeps up, or it does not). On a shared machine req/s swings with
the neighbours; the server's CPU per command is the steadier figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import command_path as cp
from commands import add_run_options, lua, wrk

#: ``eventcoord serve`` with the chainer's start a no-op: what the server did before the chain.
CHAINLESS = (
    "import sys\n"
    "from eventcoord.history import chain_process\n"
    "chain_process.ChainProcess.start = lambda self: None\n"
    "from eventcoord.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def head_of(base: str) -> int:
    """The head of the log, as ``/health`` reports it."""
    req = urllib.request.Request(base + "/health", headers={"authorization": f"Bearer {cp.TOKEN}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        head = int(json.loads(r.read())["head"])
    return head


def chained_upto(db_url: str) -> int:
    import asyncio

    from sqlalchemy import func, select

    from eventcoord.store import open_store
    from eventcoord.store.schema import event_hashes

    async def run() -> int:
        store = open_store(db_url)
        await store.start()
        try:
            return int(await store.query(lambda c: c.execute(select(func.max(event_hashes.c.position))).scalar() or 0))
        finally:
            await store.close()

    return asyncio.run(run())


def one(args: argparse.Namespace, backend: str, chained: bool, work: Path) -> dict[str, Any]:
    serve = [cp.EVENTCOORD, "serve"] if chained else [cp.PYTHON, "-c", CHAINLESS, "serve"]
    serve += ["--ttl-seconds", "3600"]
    out: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        pg = stack.enter_context(cp.fresh_postgres(args.db)) if backend == "postgresql" else None
        data = work / uuid.uuid4().hex[:8]
        db_url = pg or f"sqlite+aiosqlite:///{data}/eventcoord.db"
        ec = cp.start_eventcoord(data, cp.free_port(), pg, None, log=work / "eventcoord.log", serve=serve)
        stack.callback(ec.stop)
        sessions = cp.register_sessions(ec.base, args.connections)
        if args.warmup > 0:
            wrk([ec], lua(work / "warm.lua", sessions, "heartbeat_agent"), args.connections, args.warmup, "warmup")
        for scenario in args.commands:
            if args.quiet_wait > 0:
                cp.wait_quiet(args.quiet_below, args.quiet_wait)
            script = lua(work / f"{scenario}.lua", sessions, scenario, nonce=uuid.uuid4().hex[:8])
            r = wrk([ec], script, args.connections, args.duration, scenario)
            out[scenario] = {"rps": r.rps, "p99_ms": r.p99_ms, "cpu_us": r.server_cpu_us, "errors": r.errors}
        head = head_of(ec.base)
        behind_at_end = head - chained_upto(db_url)
        time.sleep(1.0)
        out["behind_at_end"] = behind_at_end
        out["behind_1s_later"] = head - chained_upto(db_url)
        out["head"] = head
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--db", help="postgresql+asyncpg://user@host:port: also run on PostgreSQL (fresh databases)")
    p.add_argument("--only", choices=("sqlite", "postgresql"), help="run one backend only")
    p.add_argument("--commands", nargs="*", default=["heartbeat_agent", "claim_issue"])
    add_run_options(p, duration=5, rounds=2, rounds_of="chainless/chained pairs per backend")
    args = p.parse_args(argv)
    if shutil.which("wrk") is None:
        print("wrk not found: apt-get install -y wrk", file=sys.stderr)
        return 2
    backends = [b for b in ("sqlite", "postgresql") if args.only in (None, b) and (b == "sqlite" or args.db)]
    print(f"backends={backends} connections={args.connections} duration={args.duration}s rounds={args.rounds}")
    work = Path(tempfile.mkdtemp(prefix="eventcoord-bench-chain-"))
    try:
        for backend in backends:
            runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
            for _ in range(args.rounds):
                for chained in (False, True):
                    r = one(args, backend, chained, work)
                    runs[chained].append(r)
                    label = "chained  " if chained else "chainless"
                    cells = "  ".join(
                        f"{s} {r[s]['rps']:7.0f}/s p99 {r[s]['p99_ms']:6.1f} ms {r[s]['cpu_us']:5.0f} µs"
                        for s in args.commands
                    )
                    extra = f"  head {r['head']}, chain behind {r['behind_at_end']} then {r['behind_1s_later']}"
                    print(f"  {backend:<10} {label} {cells}{extra if chained else ''}", flush=True)
            for s in args.commands:
                off = statistics.median(r[s]["rps"] for r in runs[False])
                on = statistics.median(r[s]["rps"] for r in runs[True])
                cpu_off = statistics.median(r[s]["cpu_us"] for r in runs[False])
                cpu_on = statistics.median(r[s]["cpu_us"] for r in runs[True])
                print(
                    f"{backend:<10} {s:<16} chainless {off:7.0f}/s {cpu_off:4.0f} µs  chained {on:7.0f}/s "
                    f"{cpu_on:4.0f} µs  ratio {on / off:.3f} (server CPU per command {cpu_on / cpu_off:.3f})"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
