"""Which of a replica's PostgreSQL writers decides a command: the one its first lock goes to.

A replica may keep several writers (``postgres.WRITERS``), each a connection deciding its
own batches: while one waits for the database, another decides. Two batches in flight
that lock the same rows wait for each other, though: a guard a batch holds is held until
it commits, and a command of the other batch that needs it waits (briefly, in a fast pass:
then the pass is rolled back and decided again with savepoints, ``pg_writer``). Measured
with one shared line of commands, two writers doubled uncontended throughput and, where
teams shared projects, let such waits feed a backlog (docs/performance.md, phase 5).

So each writer has a line of its own (a :class:`Lane`), and a command joins the line its
first lock chooses (:func:`affinity`): every command that first locks one project's guard,
one workspace's row or one session's row goes to the same writer, and two writers' batches
meet only on rows no command locks first (another command's session, the position counter
at commit). A command that locks nothing first joins the shortest line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eventcoord.store.gathering import Gathering
from eventcoord.store.held_locks import GuardLock
from eventcoord.store.rows_ahead import RowsAhead
from eventcoord.store.session_rows import SessionRead

if TYPE_CHECKING:
    from eventcoord.store.base import ReadsAhead


@dataclass(slots=True)
class Lane:
    """One writer's line: the commands waiting for it, its wake-up, its gathering."""

    pending: list[Any] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    gathering: Gathering = field(default_factory=Gathering)


def affinity(read_ahead: ReadsAhead | None) -> tuple[str, ...] | None:
    """The row a command locks first, as its store said (``handlers.read_ahead``): a guard
    (a project's; for a release or a transition, named by its issue or item), a workspace's
    row, a session's row. None: it said nothing."""
    first = read_ahead[0] if isinstance(read_ahead, tuple) else read_ahead
    if isinstance(first, GuardLock):
        return (first.table, first.workspace, first.key)
    if isinstance(first, SessionRead):
        return ("sessions", first.workspace, first.session_id)
    if isinstance(first, RowsAhead):
        return first.lock
    return None


def choose(lanes: Sequence[Lane], read_ahead: ReadsAhead | None) -> Lane:
    """The lane a command joins: by its first lock, else the shortest."""
    if len(lanes) == 1:
        return lanes[0]
    key = affinity(read_ahead)
    if key is None:
        return min(lanes, key=lambda lane: len(lane.pending))
    return lanes[hash(key) % len(lanes)]
