"""Instructions per command, counted by valgrind: a before/after measure the machine's noise
cannot move.

Timings on this shared 2-core machine move by a third between runs (the no-op stack alone
ran at 3,800 to 7,100 req/s within one run), so a change worth 10 % of a command is lost in
them. Instructions are not: ``valgrind --tool=callgrind`` counts every instruction the
interpreter and SQLite run in user space (not the kernel's) on the main thread, the
thread that runs the event loop and every command, the same count for the same code and
input whatever else the machine does. For each code tree it runs ``bench/inprocess.py``'s
load (``Service.execute`` from concurrent tasks on a fresh SQLite file, no HTTP) twice, with
``--low`` and ``--high`` commands per task, and reports the difference per command: start-up,
imports and migrations cancel out. ``--baseline REV`` runs a ``git archive`` of another
revision the same way (its own projections and migrations).

    .venv/bin/python bench/instructions.py --baseline bf418c2
    .venv/bin/python bench/instructions.py --kinds claim_issue --tasks 16 --low 20 --high 120

What it does not see: the HTTP layer (``bench/commands.py``), PostgreSQL's server (another
process), and time spent waiting (an instruction of a cache miss counts one). Needs
valgrind (``apt-get install -y valgrind``); each count takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from command_path import baseline_tree  # the bench folder is not a package: imported by path
from inprocess import KINDS

ROOT = Path(__file__).resolve().parent.parent
_SUMMARY = re.compile(r"^summary: (\d+)$", re.MULTILINE)


def count(src: Path | None, kind: str, tasks: int, per_task: int) -> int:
    """Instructions of the main thread of one ``inprocess.py`` child run on the code at
    ``src`` (None: this tree).

    The main thread only: it runs the event loop, and with it SQLite's writer and every
    command. The others run the migrations and the WAL checkpoints, which the store starts
    every quarter of a second whatever was written: under valgrind's slowdown their count
    grew with the run's wall time, which the machine's load sets (a run beside another
    process counted ~8 % more per heartbeat).
    """
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = f"{src}{os.pathsep}{env.get('PYTHONPATH', '')}"
    with tempfile.TemporaryDirectory(prefix="eventcoord-callgrind-") as out:
        argv = [
            "valgrind",
            "--tool=callgrind",
            "--separate-threads=yes",
            f"--callgrind-out-file={out}/run",
            *_child(kind, tasks, per_task),
        ]
        subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, check=True)
        main = Path(out) / "run-01"  # callgrind numbers the threads from 1, the main one first
        found = _SUMMARY.findall(main.read_text()) if main.exists() else []
    if not found:
        raise RuntimeError(f"callgrind wrote no count for the main thread ({main})")
    return int(found[0])


def _child(kind: str, tasks: int, per_task: int) -> list[str]:
    return [
        sys.executable,
        str(ROOT / "bench" / "inprocess.py"),
        "--child",
        "--kind",
        kind,
        "--tasks",
        str(tasks),
        "--per-task",
        str(per_task),
    ]


def per_command(src: Path | None, kind: str, tasks: int, low: int, high: int) -> float:
    """Instructions per command: the runs of ``high`` and ``low`` commands per task, apart."""
    commands = tasks * (high - low) * (2 if "+" in kind else 1)
    return (count(src, kind, tasks, high) - count(src, kind, tasks, low)) / commands


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    p.add_argument("--baseline", help="a git revision to count beside this tree")
    p.add_argument("--tasks", type=int, default=16, help="concurrent tasks, one session each (default 16)")
    p.add_argument("--low", type=int, default=20, help="commands per task of the shorter run (default 20)")
    p.add_argument("--high", type=int, default=120, help="commands per task of the longer run (default 120)")
    args = p.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install -y valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="eventcoord-baseline-") as tmp:
        trees: list[tuple[str, Path | None]] = [("this tree", None)]
        if args.baseline:
            trees.insert(0, (args.baseline, baseline_tree(args.baseline, Path(tmp))))
        print(f"instructions per command, SQLite, {args.tasks} tasks, {args.high} - {args.low} commands each")
        for kind in args.kinds:
            counted = [(name, per_command(src, kind, args.tasks, args.low, args.high)) for name, src in trees]
            line = "   ".join(f"{name}: {n / 1000:7.0f} k" for name, n in counted)
            change = f"   this tree / {args.baseline}: {counted[-1][1] / counted[0][1]:.3f}" if args.baseline else ""
            print(f"  {kind:<26} {line}{change}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
