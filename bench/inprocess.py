"""The command pipeline without HTTP: ``Service.execute`` from many concurrent tasks.

Measures what the store layer costs per command: commands/s, the process's CPU time per
command (user + system) and, on SQLite, the WAL file's size at the end, for
heartbeat_agent, claim_issue (new issues, two per new project), claim_issue +
release_issue or claim_files + release_files pairs, on a fresh SQLite file
or a fresh PostgreSQL database. With ``--baseline REF``
it also runs the same load on the code of another git revision (``git archive`` into a
temporary folder, imported first on ``PYTHONPATH``), alternating the two ``--rounds``
times, so a busy machine moves both sides alike.

    .venv/bin/python bench/inprocess.py --db postgresql+asyncpg://postgres@127.0.0.1:5432 --baseline 3872cb8
    .venv/bin/python bench/inprocess.py --kind claim_issue --db postgresql+asyncpg://postgres@127.0.0.1:5432
    .venv/bin/python bench/inprocess.py --kind claim_issue --per-task 1000 --baseline 44828ea   # the WAL
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OPERATOR_WORKSPACE = "default"
#: What each task sends: heartbeats, claims of new issues (two per new project), a claim and
#: the release of the same issue, a claim of a new path and its release (a pair counts as
#: two commands), or (``one_project``) claims and releases of issues of one backlog, every
#: task in the same project (its WIP limit set to the number of tasks).
KINDS = (
    "heartbeat_agent",
    "claim_issue",
    "claim_issue+release_issue",
    "claim_files+release_files",
    "one_project",
)


async def measure(kind: str, url: str | None, tasks: int, per_task: int) -> dict[str, float]:
    """One run in this process: a fresh store, ``tasks`` sessions, ``per_task`` commands each."""
    from eventcoord.codec import decode_command
    from eventcoord.context import Caller
    from eventcoord.service import Service
    from eventcoord.store import open_store

    operator = Caller(OPERATOR_WORKSPACE, "admin", operator=True)
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(url or f"sqlite+aiosqlite:///{folder}/eventcoord.db")
        await store.start()
        await store.migrate()
        try:
            service = Service(store)

            async def send(body: dict[str, object]) -> bytes:
                answer: Any = await service.execute(operator, decode_command(json.dumps(body).encode()))
                if hasattr(answer, "body"):  # a revision from before the service returned an Outcome
                    return bytes(answer.body)
                from eventcoord.api.answers import outcome_response

                return bytes(outcome_response(answer).content)

            sessions = [
                json.loads(await send({"type": "register_agent", "actor": f"a{i}"}))["result"]["session_id"]
                for i in range(tasks)
            ]

            if kind == "one_project":
                await send({"type": "configure_project", "project": "Backlog", "wip_limit": tasks})

            async def worker(i: int) -> None:
                for k in range(per_task):
                    if kind == "heartbeat_agent":
                        await send({"type": "heartbeat_agent", "session_id": sessions[i]})
                    elif kind in ("claim_issue+release_issue", "one_project"):  # a pair per step: two commands
                        issue = f"I{i}-{k}"
                        project = "Backlog" if kind == "one_project" else f"P{i}"
                        await send(
                            {"type": "claim_issue", "session_id": sessions[i], "project": project, "issue": issue}
                        )
                        await send({"type": "release_issue", "session_id": sessions[i], "issue": issue})
                    elif kind == "claim_files+release_files":  # a new path on a new issue, then its release
                        issue, path = f"F{i}-{k}", f"w/{i}/{k}.py"
                        await send({"type": "claim_files", "session_id": sessions[i], "issue": issue, "paths": [path]})
                        await send({"type": "release_files", "session_id": sessions[i], "issue": issue})
                    else:
                        await send(
                            {
                                "type": "claim_issue",
                                "session_id": sessions[i],
                                "project": f"P{i}-{k // 2}",
                                "issue": f"I{i}-{k}",
                            }
                        )

            t0, c0 = time.perf_counter(), os.times()
            await asyncio.gather(*(worker(i) for i in range(tasks)))
            c1, wall = os.times(), time.perf_counter() - t0
            wal = Path(folder) / "eventcoord.db-wal"  # SQLite: the log's size at the end
            wal_mb = wal.stat().st_size / 2**20 if url is None and wal.exists() else 0.0
        finally:
            await store.close()
    n = tasks * per_task * (2 if "+" in kind or kind == "one_project" else 1)
    cpu_us = ((c1.user - c0.user) + (c1.system - c0.system)) / n * 1e6
    return {"per_s": n / wall, "cpu_us": cpu_us, "wal_mb": wal_mb}


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def run_child(src: Path | None, args: argparse.Namespace) -> dict[str, float]:
    """One measurement in a fresh interpreter (on ``src`` first, when given)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = f"{src}{os.pathsep}{env.get('PYTHONPATH', '')}"
    argv = [
        sys.executable,
        __file__,
        "--child",
        "--kind",
        args.kind,
        "--tasks",
        str(args.tasks),
        "--per-task",
        str(args.per_task),
    ]
    if args.db:
        argv += ["--db", args.db]
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--db", help="postgresql+asyncpg://user@host:port (a fresh database per run); default SQLite")
    p.add_argument("--kind", choices=KINDS, default="heartbeat_agent")
    p.add_argument("--tasks", type=int, default=32, help="concurrent tasks, one session each (default 32)")
    p.add_argument("--per-task", type=int, default=100, help="commands per task (default 100)")
    p.add_argument("--rounds", type=int, default=2, help="alternations with --baseline (default 2)")
    p.add_argument("--baseline", help="a git revision to compare with (run from a checkout)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import command_path as cp

        with cp.fresh_postgres(args.db) if args.db else _nothing() as url:
            print(json.dumps(asyncio.run(measure(args.kind, url, args.tasks, args.per_task))))
        return 0
    print(
        f"kind={args.kind} backend={'postgresql' if args.db else 'sqlite'} tasks={args.tasks} per-task={args.per_task}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        base = None
        if args.baseline:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from command_path import baseline_tree

            base = baseline_tree(args.baseline, Path(tmp))
        runs: dict[str, list[dict[str, float]]] = {"baseline": [], "this tree": []}
        for _ in range(args.rounds if base else 1):
            for name, src in ((("baseline", base),) if base else ()) + (("this tree", None),):
                r = run_child(src, args)
                runs[name].append(r)
                wal = f"   WAL {r['wal_mb']:,.0f} MB at the end" if r.get("wal_mb") else ""
                print(
                    f"  {name:<10} {r['per_s']:8.0f} commands/s   {r['cpu_us']:6.0f} us CPU per command{wal}",
                    flush=True,
                )
    for name, rs in runs.items():
        if rs:
            print(
                f"median {name:<10} {statistics.median(r['per_s'] for r in rs):8.0f} commands/s   "
                f"{statistics.median(r['cpu_us'] for r in rs):6.0f} us CPU"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
