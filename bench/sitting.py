"""Before and after in one sitting: ``bench/fleet.py`` and ``bench/commands.py`` on a baseline
revision and on this checkout, alternating, on both backends, with one side-by-side table.

A change to the write path must not lower the fleet one server carries nor any command's
ratio to the no-op stack; absolute rates move between sittings, so only figures measured
here, tree beside tree, are compared. Each tree runs from its own files (the baseline from
``git archive REV``) with this checkout's virtual environment.

    .venv/bin/python bench/sitting.py --baseline adf6c75 --db postgresql+asyncpg://postgres@127.0.0.1:5432
    .venv/bin/python bench/sitting.py --baseline HEAD~3 --skip-commands --fleet-sqlite 16000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def export(rev: str, into: Path) -> Path:
    """The tree of ``rev`` in ``into`` (its own ``projections/`` and ``migrations/`` links)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(HERE), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run(tree: Path, script: str, args: Sequence[str], out: Path, log: Path) -> dict[str, Any]:
    """One benchmark of ``tree`` (its code first on the path), its JSON results."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    argv = [PYTHON, str(tree / "bench" / script), *args, "--json", str(out)]
    print(f"  {tree.name}: {script} {' '.join(args)}", flush=True)
    with log.open("a") as f:
        f.write(f"\n### {tree} {' '.join(argv)}\n")
        f.flush()
        subprocess.run(argv, cwd=tree, env=env, stdout=f, stderr=subprocess.STDOUT, check=True)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def fleet_rows(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One row per fleet size: p50/p99 and whether it passed, before and after."""
    rows = []
    by_fleet = {s["fleet"]: s for s in after["steps"]}
    for b in before["steps"]:
        a = by_fleet.get(b["fleet"])
        if a is None:
            continue
        rows.append(
            f"| {before['backend']} fleet {b['fleet']:,} | p50 {b['p50_ms']} / p99 {b['p99_ms']} ms"
            f" ({b['server_cpu_us_per_command']} µs CPU/cmd) | p50 {a['p50_ms']} / p99 {a['p99_ms']} ms"
            f" ({a['server_cpu_us_per_command']} µs CPU/cmd) |"
        )
    return rows


def rps(result: dict[str, Any]) -> float:
    """A workload's command req/s, the median of its runs (each a no-op run and a command run)."""
    return float(statistics.median(command["rps"] for _, command in result["runs"]))


def vs_one(replicas: dict[str, Any]) -> str:
    """1, 2 and 3 replicas' totals as multiples of one's."""
    return " / ".join(f"x{v:.2f}" for v in replicas.get("vs_one", {}).values())


def command_rows(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One row per backend and workload: req/s and ratio to the no-op stack, before and after."""
    rows = []
    for backend in ("sqlite", "postgresql"):
        b, a = before.get(backend, {}), after.get(backend, {})
        for name, rb in b.items():
            ra = a.get(name)
            if not isinstance(rb, dict) or not isinstance(ra, dict):
                continue
            if "ratio" in rb:
                rows.append(
                    f"| {backend} {name} | {rps(rb):.0f} req/s, ratio {rb['ratio']:.2f}"
                    f" | {rps(ra):.0f} req/s, ratio {ra['ratio']:.2f} |"
                )
            elif "p99_ms" in rb:
                rows.append(f"| {backend} {name} p99 | {rb['p99_ms']:.1f} ms | {ra['p99_ms']:.1f} ms |")
    for scenario, rb in before.get("replicas", {}).items():
        ra = after.get("replicas", {}).get(scenario, {})
        rows.append(f"| replicas {scenario} (vs one) | {vs_one(rb)} | {vs_one(ra)} |")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--baseline", required=True, help="the revision to compare this checkout with")
    p.add_argument("--db", help="postgresql+asyncpg://user@host:port: PostgreSQL too")
    p.add_argument("--fleet-sqlite", type=int, action="append", help="fleet sizes on SQLite (12000, 16000)")
    p.add_argument("--fleet-pg", type=int, action="append", help="fleet sizes on PostgreSQL (4000, 5000)")
    p.add_argument("--fleet-duration", type=float, default=12.0, help="measured seconds per fleet step (12)")
    p.add_argument("--commands-duration", type=float, default=5.0, help="seconds per commands.py run (5)")
    p.add_argument("--skip-fleet", action="store_true")
    p.add_argument("--skip-commands", action="store_true")
    p.add_argument("--out", type=Path, help="write the table (markdown) here too")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="eventcoord-sitting-"))
    before = export(args.baseline, work / "before")
    after = HERE
    log = work / "log.txt"
    print(f"sitting in {work} (full output: {log})", flush=True)
    rows: list[str] = []
    fleets = [("sqlite", args.fleet_sqlite or [12000, 16000], [])]
    if args.db:
        fleets.append(("postgresql", args.fleet_pg or [4000, 5000], ["--db", args.db]))
    if not args.skip_fleet:
        for backend, sizes, db in fleets:
            step = [*db, "--duration", str(args.fleet_duration), "--warmup", "4"]
            for size in sizes:
                step += ["--fleet", str(size)]
            got = {
                tree.name: run(tree, "fleet.py", step, work / f"fleet-{backend}-{tree.name}.json", log)
                for tree in ((before, after) if backend == "sqlite" else (after, before))
            }
            rows += fleet_rows(got["before"], got[after.name])
    if not args.skip_commands:
        step = ["--duration", str(args.commands_duration), *(["--db", args.db] if args.db else [])]
        got = {t.name: run(t, "commands.py", step, work / f"commands-{t.name}.json", log) for t in (before, after)}
        rows += command_rows(got["before"], got[after.name])
    table = "\n".join([f"| measure | before ({args.baseline}) | after (this checkout) |", "| --- | --- | --- |", *rows])
    print("\n" + table)
    if args.out:
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
