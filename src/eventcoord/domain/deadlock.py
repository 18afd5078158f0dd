"""The wait-for graph: a session points at the live holders of what it waits for.

The rule: docs/protocol.md#deadlock.

A new wait adds edges from the caller to the holders it would wait for; it is refused when
one of them already reaches the caller (that would close a cycle). Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(slots=True)
class WaitGraph:
    """``edges[s]`` = what session ``s`` waits for: ``(kind, key, holder session)`` each."""

    edges: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)

    def add(self, waiter: str, kind: str, key: str, holder: str) -> None:
        """``waiter`` waits for (``kind``, ``key``), held by ``holder``."""
        if holder != waiter:
            self.edges.setdefault(waiter, []).append((kind, key, holder))

    def path(self, start: str, goal: str) -> list[tuple[str, str, str, str]] | None:
        """Edges ``(waiter, kind, key, holder)`` leading from ``start`` to ``goal``, if any."""
        seen = {start}
        stack: list[tuple[str, list[tuple[str, str, str, str]]]] = [(start, [])]
        while stack:
            node, trail = stack.pop()
            for kind, key, holder in self.edges.get(node, ()):
                step = [*trail, (node, kind, key, holder)]
                if holder == goal:
                    return step
                if holder not in seen:
                    seen.add(holder)
                    stack.append((holder, step))
        return None

    def cycles(self) -> list[list[str]]:
        """Every session that lies on a cycle, one list per cycle found (for tests)."""
        found: list[list[str]] = []
        for node in sorted(self.edges):
            trail = self.path(node, node)
            if trail is not None:
                found.append([w for w, _, _, _ in trail])
        return found


def find_cycle(graph: WaitGraph, me: str, kind: str, key: str, holders: Iterable[str]) -> list[dict[str, str]] | None:
    """The cycle that ``me`` waiting for (``kind``, ``key``) held by ``holders`` would close.

    In order: each session and the resource it waits for, held by the next entry's session;
    the last entry's resource is held by ``me``.
    """
    for holder in sorted(set(holders)):
        if holder == me:
            continue
        trail = graph.path(holder, me)
        if trail is not None:
            cycle = [{"session_id": me, "kind": kind, "key": key, "holder_session_id": holder}]
            cycle += [{"session_id": w, "kind": k, "key": r, "holder_session_id": h} for w, k, r, h in trail]
            return cycle
    return None
