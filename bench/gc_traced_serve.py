"""``eventcoord serve`` with the cyclic collector's every pass timed: where its pauses go.

    .venv/bin/python bench/gc_traced_serve.py --trace FILE [--no-freeze] serve [serve options]

Runs the real ``eventcoord`` entry point in this process with a ``gc.callbacks`` hook
that times each collection by generation, and at exit appends one JSON line to FILE:
the passes, their total and longest pause per generation, and how many objects the
startup froze. ``--no-freeze`` skips ``freeze_startup_heap`` (the service as it was before
it froze its startup heap), for side-by-side runs; ``bench/commands.py --gc-trace DIR``
starts the servers this way.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import sys
import time
from collections import defaultdict


def main() -> int:
    """Install the timer, then hand the rest of the command line to ``eventcoord``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", required=True, help="append the pauses as one JSON line to this file")
    parser.add_argument("--no-freeze", action="store_true", help="leave the startup heap to the collector")
    ours, rest = parser.parse_known_args()
    pauses: dict[int, list[float]] = defaultdict(list)
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses[info["generation"]].append(time.perf_counter() - started[0])

    def report() -> None:
        line: dict[str, object] = {"freeze": not ours.no_freeze, "frozen": gc.get_freeze_count()}
        for generation, xs in sorted(pauses.items()):
            xs.sort()
            line[f"gen{generation}"] = {
                "passes": len(xs),
                "total_ms": round(1000 * sum(xs), 2),
                "median_ms": round(1000 * xs[len(xs) // 2], 3),
                "max_ms": round(1000 * xs[-1], 2),
            }
        with open(ours.trace, "a") as out:
            out.write(json.dumps(line) + "\n")

    gc.callbacks.append(timed)
    atexit.register(report)
    from eventcoord.cli import main as eventcoord
    from eventcoord.cli import server

    if ours.no_freeze:
        server.freeze_startup_heap = lambda _app=None: None  # type: ignore[assignment]
    return eventcoord(rest)


if __name__ == "__main__":
    sys.exit(main())
