"""The wait-for graph: a session points at the live holders of what it waits for.

The rule: docs/protocol.md#deadlock.

A wait for an issue or for paths needs every holder to let go; a wait for a named lease
needs any one slot (``ANY_OF``), so it is stuck only while every holder is, and never
while a slot is free. A new wait is refused when it would be stuck for good: when the
holders it needs (all of them for a lease, any one otherwise) can only move once the
caller does, directly or through others. Pure, no I/O; linear in the graph's size.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

#: Kinds of wait that any one holder's release serves (a free slot of a named lease).
ANY_OF = frozenset({"lease"})


@dataclass(slots=True)
class WaitGraph:
    """``edges[s]`` = what session ``s`` waits for: ``(kind, key, holder session)`` each.

    A session waits in one line at a time, so its edges are all of one kind. ``free`` are
    the waiters of a named lease that has a free slot (whatever its holders do, they are
    not stuck).
    """

    edges: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    free: set[str] = field(default_factory=set)

    def add(self, waiter: str, kind: str, key: str, holder: str) -> None:
        """``waiter`` waits for (``kind``, ``key``), held by ``holder``."""
        if holder != waiter:
            self.edges.setdefault(waiter, []).append((kind, key, holder))

    def add_free(self, waiter: str) -> None:
        """``waiter`` waits for a named lease with a free slot: it is not stuck."""
        self.free.add(waiter)

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

    def stuck_behind(self, me: str) -> dict[str, tuple[str, str, str] | None]:
        """The sessions that could move only once ``me`` does, were ``me`` stuck: for each,
        the wait (``kind``, ``key``, holder) that holds it, the holder stuck before it
        (``me``: None). A least fixed point, grown from ``me`` over the reversed edges."""
        waiting_on: dict[str, list[tuple[str, tuple[str, str, str]]]] = {}
        missing: dict[str, int] = {}  # an ANY_OF waiter: its holders not yet stuck
        for waiter, edges in self.edges.items():
            holders = {h for _, _, h in edges}
            if edges and edges[0][0] in ANY_OF:
                missing[waiter] = len(holders)
            for edge in edges:
                waiting_on.setdefault(edge[2], []).append((waiter, edge))
        why: dict[str, tuple[str, str, str] | None] = {me: None}
        todo = deque([me])
        while todo:
            holder = todo.popleft()
            counted: set[str] = set()
            for waiter, edge in waiting_on.get(holder, ()):
                if waiter in why or waiter in self.free:
                    continue
                if waiter in missing:
                    if waiter in counted:
                        continue  # one holder counts once, whatever its edges
                    counted.add(waiter)
                    missing[waiter] -= 1
                    if missing[waiter] > 0:
                        continue
                why[waiter] = edge
                todo.append(waiter)
        return why


def find_cycle(graph: WaitGraph, me: str, kind: str, key: str, holders: Iterable[str]) -> list[dict[str, str]] | None:
    """The cycle that ``me`` waiting for (``kind``, ``key``) held by ``holders`` would close.

    In order: each session and the resource it waits for, held by the next entry's session;
    the last entry's resource is held by ``me``. None when the wait could still be served:
    for a named lease, while one holder can move without ``me``.
    """
    others = sorted(set(holders) - {me})
    if not others:
        return None
    stuck = graph.stuck_behind(me)
    if kind in ANY_OF and not all(h in stuck for h in others):
        return None
    holder = next((h for h in others if h in stuck), None)
    if holder is None:
        return None
    cycle = [{"session_id": me, "kind": kind, "key": key, "holder_session_id": holder}]
    node = holder
    while (edge := stuck[node]) is not None:
        k, r, h = edge
        cycle.append({"session_id": node, "kind": k, "key": r, "holder_session_id": h})
        node = h
    return cycle
