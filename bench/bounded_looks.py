"""Bounded looks: the worst files hand-off and pull we can construct, without and with the limit.

A holder keeps a plain path of 511 names (``DEEP``) while N shared files waiters (or N
queued items) each declare a pattern that costs about 51,000 steps to tell apart from it.
Prints the CPU time and steps of one hand-off (``hand_off_files``) and of one pull's
look at the items (``blocking_path`` over them), first with no limit (what main did), then
with one decision's steps (``DECISION_STEPS``). No database: the decisions alone.

    .venv/bin/python bench/bounded_looks.py --waiters 20
"""

from __future__ import annotations

import argparse
import time

from eventcoord.context import Caller, Context, Decision
from eventcoord.domain.files import ClaimRow
from eventcoord.domain.handoff import hand_off_files
from eventcoord.domain.paths import DECISION_STEPS, Work
from eventcoord.domain.queue.selection import blocking_path
from eventcoord.domain.queue.state import FileClaimView, ItemState
from eventcoord.domain.sessions import Claimant, SessionState
from eventcoord.domain.waits import Waiter

NOW = 1_800_000_000_000_000
DEEP = "/".join(chr(0x100 + i) for i in range(511)) + "/z"


def costly(k: int) -> str:
    return "**/" + "/".join(f"[{chr(0x200 + (i + k) % 200)}]" for i in range(14)) + f"/{chr(0x4E00 + k)}/**"


def person(sid: str) -> SessionState:
    return SessionState(sid, f"actor-{sid}", "agent", True, "explicit-override", "host", NOW, None, None)


def hand_off(n: int, work: Work) -> tuple[float, int, int]:
    ctx = Context(Caller("default", "agent"), NOW, 120)  # type: ignore[arg-type]
    line = [
        Waiter(k + 1, "files", f"x/{k}", f"s-{k}", f"actor-s-{k}", NOW, person(f"s-{k}"), issue=f"W-{k}",
               paths=(f"x/{k}", costly(k)), exclusive=False)
        for k in range(n)
    ]  # fmt: skip
    held = [ClaimRow(1, 0, "A-1", "s-alice", "alice", DEEP, True)]
    began = time.process_time()
    granted = hand_off_files(
        Decision(), line, held, {"s-alice": person("s-alice")}, Claimant("s-alice", "alice"), ctx, work
    )
    return time.process_time() - began, work.spent, len(granted)


def pull(n: int, work: Work) -> tuple[float, int]:
    claims = [FileClaimView(DEEP, "s-alice", True)]
    items = [ItemState(f"w-{k}", "Q", None, 0, "queued", None, None, (), (costly(k),), None, k) for k in range(n)]
    began = time.process_time()
    for item in items:
        if not work.exhausted:
            blocking_path(item, claims, "s-bob", work)
    return time.process_time() - began, work.spent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waiters", type=int, default=20, help="waiters (and queued items) behind the holder")
    args = p.parse_args()
    for label, make in (
        ("no limit (main)", lambda: Work()),
        (f"{DECISION_STEPS:,} steps", lambda: Work(DECISION_STEPS)),
    ):
        took, steps, granted = hand_off(args.waiters, make())
        print(
            f"hand-off, {args.waiters} waiters, {label}: {took * 1000:.1f} ms CPU, {steps:,} steps, {granted} granted"
        )
        took, steps = pull(args.waiters, make())
        print(f"pull, {args.waiters} items, {label}: {took * 1000:.1f} ms CPU, {steps:,} steps")


if __name__ == "__main__":
    main()
