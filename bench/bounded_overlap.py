"""Bounded decisions: the worst claim_files we can construct, before and after, in one run.

*Before* is the path matcher of ``--before`` (default: ``main``), loaded from git into a
throw-away package (its product automaton over characters); *after* is this checkout's.
Prints, for each hostile shape: the time of one overlap check before and after, the steps
after (``paths.Work``) and microseconds per step; then whole ``claim_files`` decisions of
100 patterns against 100 live claims (``decide_claim_files``, no database), with their
steps and whether they were decided or refused (422, ``too_complex``); then the largest
microseconds per step seen over ``--random`` random pairs of the grammar at its limits,
which is what turns the step limit into a time limit. Times are CPU time of the process
(``time.process_time``): on a shared machine wall time measures the neighbours.

    .venv/bin/python bench/bounded_overlap.py
    .venv/bin/python bench/bounded_overlap.py --random 20000 --before-timeout 30
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eventcoord.commands import ClaimFiles
from eventcoord.context import Caller, Context
from eventcoord.domain import files
from eventcoord.domain.paths import MAX_PATTERN_CHARS, PathError, Work, normalise_path, overlaps
from eventcoord.domain.paths.overlap import clear_caches
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_800_000_000_000_000
FILES = ("__init__.py", "charsets.py", "syntax.py", "matching.py", "overlap.py")


def load_before(ref: str) -> Any:
    """Main's ``eventcoord.domain.paths`` as the package ``before_paths`` (from git)."""
    folder = Path(tempfile.mkdtemp(prefix="before-paths-"))
    package = folder / "before_paths"
    package.mkdir()
    for name in FILES:
        text = subprocess.run(
            ["git", "show", f"{ref}:src/eventcoord/domain/paths/{name}"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (package / name).write_text(text.replace("eventcoord.domain.paths", "before_paths"))
    sys.path.insert(0, str(folder))
    return importlib.import_module("before_paths")


# ----------------------------------------------------------------------------- shapes


def stars(n: int, piece: str, last: str) -> str:
    """One segment: n stars around pieces, ending in ``last`` (the issue's attack)."""
    return "*" + "*".join([piece] * (n - 1)) + "*" + last


def names(n: int) -> list[str]:
    return [chr(0x100 + i) for i in range(n)]


def shapes(limit: int, v: int = 0) -> dict[str, tuple[str, str]]:
    """Hostile pairs of patterns of ``limit`` characters. None is filtered out by the text
    every match starts or ends with (both are empty), so each needs the glob rules; ``v``
    varies one literal character of each (so that many of one shape can be claimed at once)."""
    x = chr(0x4E00 + v)
    run = max(1, (limit - 24) // 15)
    many = names(limit // 2)
    classes = ["[" + chr(0x100 + i) + "]" for i in range(13)]
    width = limit // 4 - 4
    big = "[" + "".join(chr(0x100 + 2 * i) for i in range(width)) + "]"
    big2 = "[" + "".join(chr(0x101 + 2 * i) for i in range(width)) + "]"
    shaped = {
        # the issue's attack: one segment of 16 stars, long runs between them, ends apart
        "the issue's glob (ends differ)": (x + stars(16, "a" * run, "c"), x + stars(16, "a" * run, "b")),
        "16 stars, one segment": ("*" + x + stars(14, "a" * run, "c*"), "*" + x + stars(14, "a" * run, "b*")),
        "pieces placed in a long name": (
            "*" + "*".join(["a" * 30 + x + "?"] * 6) + "*",
            "?" + "a" * (limit - 3) + "?",
        ),
        "16 star segments": (
            "/".join(["*" + "a" * (run - 2) + x] * 15 + ["b*"]),
            "/".join(["*" + "a" * (run - 2) + x] * 14 + ["*b", "*"]),
        ),
        "a ** block placed among many names": (
            "**/" + "/".join(classes) + "/" + x + "/**",
            "*/" + "/".join(many[: (limit - 6) // 2]) + "/*",
        ),
        "** vs ** with many names": (
            "**/" + "/".join(["?"] * 13) + "/" + x + "/**",
            "**/" + "/".join(many[: (limit - 10) // 2]) + "/*/**",
        ),
        "big classes": (
            "*" + x + big * ((limit - 3) // len(big)) + "*",
            "*" + x + big2 * ((limit - 3) // len(big2)) + "*",
        ),
    }
    return {name: (a[:limit], b[:limit]) for name, (a, b) in shaped.items()}


def fits(pattern: str) -> bool:
    try:
        normalise_path(pattern)
    except PathError:
        return False
    return True


def time_pair(check: Callable[[str, str], bool], a: str, b: str) -> tuple[bool, float]:
    started = time.process_time()
    result = check(a, b)
    return result, time.process_time() - started


def _before_pair(ref: str, a: str, b: str, out: Any) -> None:
    before = load_before(ref)
    try:
        out.put(time_pair(before.overlaps, a, b))
    except ValueError as e:  # its PathError: refused there too
        out.put((f"refused: {e}", 0.0))


def before_pair(ref: str, a: str, b: str, timeout: float) -> str:
    """Time main's check in a child process, given up after ``timeout`` seconds."""
    queue: Any = multiprocessing.Queue()
    child = multiprocessing.Process(target=_before_pair, args=(ref, a, b, queue))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return f"> {timeout:.0f} s"
    result, seconds = queue.get(timeout=5)
    if isinstance(result, str):
        return result
    return f"{seconds * 1e3:10.1f} ms ({result})"


def after_pair(a: str, b: str) -> tuple[bool, float, int]:
    best = float("inf")
    spent = 0
    result = False
    for _ in range(3):
        clear_caches()
        work = Work()
        started = time.process_time()
        result = overlaps(a, b, work)
        best, spent = min(best, time.process_time() - started), work.spent
    return result, best, spent


# --------------------------------------------------------------------- whole commands


def session(sid: str) -> SessionState:
    return SessionState(sid, f"actor-{sid}", "agent", True, "explicit-override", None, NOW, None, None)


def decide(requested: list[str], live: list[str]) -> tuple[str, float, int]:
    """decide_claim_files of ``requested`` against ``live`` claims of another session, cold."""
    held = [files.ClaimRow(i + 1, 0, "OTHER-1", "s-other", "other", p, True) for i, p in enumerate(live)]
    sessions = {"s-me": session("s-me"), "s-other": session("s-other")}
    cmd = ClaimFiles(issue="MINE-1", paths=requested, session_id="s-me")
    ctx = Context(Caller("default", "agent"), NOW, 120)  # type: ignore[arg-type]
    state = files.ClaimFilesState(sessions["s-me"], held, sessions)
    clear_caches()
    for p in live:  # live claims were analysed when they were claimed
        normalise_path(p)
    started = time.process_time()
    try:
        d = files.decide_claim_files(state, cmd, ctx)
        if d.error is not None:
            outcome = f"refused {d.error.code}, {len(d.error.details['conflicts'])} conflicts"
        else:
            outcome = f"decided, {len(d.result['claimed'])} claimed"
    except DomainError as e:
        outcome = f"refused {e.code} ({e.details.get('reason')})"
    seconds = time.process_time() - started
    return outcome, seconds, 0


def commands() -> dict[str, tuple[list[str], list[str]]]:
    rng = random.Random(7)
    out: dict[str, tuple[list[str], list[str]]] = {}
    variants = [shapes(MAX_PATTERN_CHARS, v) for v in range(200)]
    for name in variants[0]:
        requested = [variants[v][name][0] for v in range(100)]
        live = [variants[v][name][1] for v in range(100, 200)]
        assert all(map(fits, requested + live)), name
        out[name] = (requested, live)
    realistic_live = [f"src/pkg{rng.randrange(50)}/**/*.{rng.choice(['py', 'md', 'ts'])}" for _ in range(100)]
    realistic_new = [f"src/pkg{rng.randrange(50)}/mod{i}/file{i}.py" for i in range(100)]
    out["realistic: 100 files vs 100 globs"] = (realistic_new, realistic_live)
    out["realistic: 100 globs vs 100 globs"] = (
        [f"**/gen{i}/*.[ch]" for i in range(100)],
        [f"**/test_{i}*.py" for i in range(100)],
    )
    return out


# ------------------------------------------------------------------------ calibration

TOKENS = ["a", "b", ".", "*", "?", "[ab]", "[!a]", "\\*", "é"]


def random_pattern(rng: random.Random) -> str:
    """A pattern of the grammar at its limits: up to 16 wildcards, up to the length limit."""
    while True:
        segments: list[str] = []
        wildcards = rng.randint(0, 16)
        length = rng.choice([8, 32, 128, MAX_PATTERN_CHARS])
        while sum(map(len, segments)) + len(segments) < length:
            if wildcards and rng.random() < 0.15:
                segments.append("**")
                wildcards -= 1
                continue
            seg = ""
            for _ in range(rng.randint(1, 40)):
                token = rng.choice(TOKENS)
                if token in ("*", "?", "[ab]", "[!a]"):
                    if not wildcards:
                        token = "a"
                    else:
                        wildcards -= 1
                seg += token * (rng.randint(1, 30) if token in ("a", "b") else 1)
            segments.append(seg)
        pattern = "/".join(segments)[:length]
        if fits(pattern):
            return pattern


def calibrate(pairs: int) -> tuple[float, float, int]:
    """Largest and median microseconds per step (pairs of 100 steps or more: below, the
    clock's noise is the figure), and most steps, over random pairs (cold)."""
    rng = random.Random(11)
    ratios: list[float] = []
    most = 0
    for _ in range(pairs):
        a, b = random_pattern(rng), random_pattern(rng)
        _, seconds, spent = after_pair(a, b)
        if spent >= 100:
            ratios.append(seconds * 1e6 / spent)
        most = max(most, spent)
    return max(ratios), statistics.median(ratios), most


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="main", help="git ref of the matcher to compare with")
    parser.add_argument("--before-timeout", type=float, default=20.0, help="seconds one check before may take")
    parser.add_argument("--random", type=int, default=3000, help="random pairs for the calibration")
    args = parser.parse_args()

    print(f"one overlap check, at the old limit (1,024 characters) and at the new ({MAX_PATTERN_CHARS}):")
    for limit in (1000, MAX_PATTERN_CHARS):
        for name, (a, b) in shapes(limit).items():
            before = before_pair(args.before, a, b, args.before_timeout)
            if fits(a) and fits(b):
                result, seconds, spent = after_pair(a, b)
                after = f"{seconds * 1e3:7.2f} ms ({result}) {spent:6d} steps {seconds * 1e6 / spent:5.2f} us/step"
            else:
                after = "refused: too_long (422, before any check)"
            print(f"  {limit:4d}  {name:32s} before {before:>22s}   after {after}")

    print("\nclaim_files of 100 patterns against 100 live claims (decide_claim_files, cold caches):")
    for name, (requested, live) in commands().items():
        outcome, seconds, _ = decide(requested, live)
        print(f"  {name:36s} {seconds * 1e3:8.1f} ms  {outcome}")

    worst, median, most = calibrate(args.random)
    print(
        f"\n{args.random} random pairs at the limits: at most {worst:.2f} us/step (median {median:.2f}),"
        f" at most {most} steps for one pair; the limit of one command is {files.CLAIM_WORK_LIMIT:,} steps"
        f" = {files.CLAIM_WORK_LIMIT * worst / 1e3:.0f} ms at the worst ratio seen"
    )


if __name__ == "__main__":
    main()
