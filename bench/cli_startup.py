"""What a coding agent pays per hook call, and a CLI read, from process start to exit.

Starts ``eventcoord serve`` (SQLite, no NATS) on a fresh data folder, then, interleaved in
one run (a load drift hits every way alike), times ``--runs`` processes of each way:

    python -c pass                      the interpreter alone, the floor
    eventcoord hook claude              a Claude Code PreToolUse of a Write (a file it holds)
    eventcoord hook claude (no server)  the same with nothing listening: the fail-open path
    eventcoord leases                   a read over HTTP, rendered as a table

and prints each way's median and 90th percentile wall time, the median's ratio to
``python -c pass``, the median CPU time the process used (user + system: what load from other
processes inflates least) and the targets (a hook call at most 60 ms, ``eventcoord leases`` at
most 150 ms, wall time).

    .venv/bin/python bench/cli_startup.py              # 40 runs of each way
    .venv/bin/python bench/cli_startup.py --runs 100
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOKEN = "bench-token"
TARGETS_MS = {"eventcoord hook claude": 60.0, "eventcoord leases": 150.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "eventcoord.cli", "serve", "--data-dir", str(work / "data"), "--nats", "off"]
    env = {**os.environ, "EVENTCOORD_BOOTSTRAP_TOKEN": TOKEN}
    proc = subprocess.Popen([*argv, "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("eventcoord serve exited")
        try:
            if httpx.get(base + "/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("eventcoord serve not ready")


def seed(base: str) -> None:
    """A few live sessions holding issues, so ``leases`` renders a table of rows."""
    with httpx.Client(base_url=base, headers={"authorization": f"Bearer {TOKEN}"}) as http:
        for n in range(5):
            sid = http.post("/v1/commands", json={"type": "register_agent", "actor": f"agent-{n}"}).json()["result"]
            http.post(
                "/v1/commands",
                json={"type": "claim_issue", "session_id": sid["session_id"], "project": "P", "issue": f"P-{n}"},
            )


def pre_tool_use(work: Path) -> bytes:
    """A Claude Code PreToolUse of a Write, as the real harness sends it (see harnesses.md)."""
    return json.dumps(
        {
            "session_id": "bench-session-0001",
            "transcript_path": str(work / "transcript.jsonl"),
            "cwd": str(work / "repo"),
            "permission_mode": "acceptEdits",
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(work / "repo" / "src" / "app.py"), "content": "print('hi')\n"},
            "tool_use_id": "toolu_1",
        }
    ).encode()


def measure(base: str, work: Path, runs: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    script = shutil.which("eventcoord", path=str(Path(sys.executable).parent)) or "eventcoord"
    env = {**os.environ, "EVENTCOORD_URL": base, "EVENTCOORD_TOKEN": TOKEN}
    env.pop("EVENTCOORD_HOOK_FAIL", None)
    down = {**env, "EVENTCOORD_URL": f"http://127.0.0.1:{free_port()}"}
    payload = pre_tool_use(work)
    ways: dict[str, tuple[list[str], dict[str, str], bytes | None]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], env, None),
        "eventcoord hook claude": ([script, "hook", "claude"], env, payload),
        "eventcoord hook claude (no server)": ([script, "hook", "claude"], down, payload),
        "eventcoord leases": ([script, "leases"], env, None),
    }
    for argv, e, stdin in ways.values():  # warm the file cache; the first hook call claims the file
        subprocess.run(argv, env=e, input=stdin, capture_output=True, check=False, cwd=work)
    wall: dict[str, list[float]] = {k: [] for k in ways}
    cpu: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(runs):
        for label, (argv, e, stdin) in ways.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            done = subprocess.run(argv, env=e, input=stdin, capture_output=True, check=False, cwd=work)
            wall[label].append((time.perf_counter() - t) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[label].append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
            if done.returncode != 0:
                raise RuntimeError(f"{label}: exit {done.returncode}: {done.stderr.decode()}")
    return wall, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=40)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ec-cli-bench-"))
    (work / "repo" / "src").mkdir(parents=True)
    proc, base = start_server(work)
    try:
        seed(base)
        times, cpu = measure(base, work, args.runs)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    floor = statistics.median(times["python -c pass"])
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"{args.runs} runs of each way, interleaved; load average {load}; {os.cpu_count()} cores")
    print(f"{'way':<36} {'median ms':>9} {'p90 ms':>7} {'/ pass':>6} {'CPU ms':>7}  target (median)")
    for label, ms in times.items():
        ordered = sorted(ms)
        median, p90 = statistics.median(ordered), ordered[int(len(ordered) * 0.9) - 1]
        target = TARGETS_MS.get(label)
        verdict = "" if target is None else f"<= {target:g} ms: {'met' if median <= target else 'NOT met'}"
        used = statistics.median(cpu[label])
        print(f"{label:<36} {median:>9.1f} {p90:>7.1f} {median / floor:>6.2f} {used:>7.1f}  {verdict}")


if __name__ == "__main__":
    main()
