"""A pull from a project at its WIP cap costs the same with 30 or 300 items queued on issues.

Every queued item on a free issue is refused by the cap the first one met, so after it a
pull skips them unread (only an item the caller's own lease covers, or one its recovery
freed, could still be taken): it reads the queue a page at a time, not six statements an
item (before: a pull over 300 such items sent ~1,800 statements, holding the project's
guard all the while). Counted on the real stores: each statement the pull sends to
PostgreSQL (asyncpg) or SQLite (the writer's trace callback).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

from tests.contract.test_group_commit import encoded, execute, statements_sent

from eventcoord.service import Outcome, Service


@contextlib.contextmanager
def statements(store: Any) -> Iterator[list[str]]:
    """Every statement the store's writer runs meanwhile (one round trip each on PostgreSQL)."""
    if store.dialect == "postgresql":
        with statements_sent() as sent:
            yield sent
        return
    sent: list[str] = []
    raw = store._conn.connection.driver_connection  # the SQLite writer's own connection
    raw.set_trace_callback(sent.append)
    try:
        yield sent
    finally:
        raw.set_trace_callback(None)


async def _ok(service: Service, body: dict[str, Any]) -> dict[str, Any]:
    answer = await execute(service, body)
    assert isinstance(answer, Outcome) and answer.status == 200, answer
    result: dict[str, Any] = json.loads(encoded(answer))["result"]
    return result


class _AtCap:
    """Three agents hold project P's cap of 3; a fourth pulls."""

    def __init__(self, store: Any) -> None:
        self.store, self.service, self.queued = store, Service(store), 0

    async def start(self) -> None:
        self.sids = [
            (await _ok(self.service, {"type": "register_agent", "actor": f"a{i}"}))["session_id"] for i in range(4)
        ]
        for i, sid in enumerate(self.sids[:3]):
            await _ok(self.service, {"type": "claim_issue", "session_id": sid, "project": "P", "issue": f"P-held-{i}"})

    async def queue_on_issues(self, n: int) -> None:
        """``n`` more items on free issues, ahead of every item without one (a higher priority)."""
        for start in range(self.queued, self.queued + n, 50):
            await asyncio.gather(
                *(
                    _ok(self.service, {"type": "enqueue_work", "project": "P", "issue": f"P-{i}", "priority": 1})
                    for i in range(start, min(start + 50, self.queued + n))
                )
            )
        self.queued += n

    async def pull(self) -> int:
        """The statements of a pull by the fourth agent, which takes the item without an issue."""
        plain = (await _ok(self.service, {"type": "enqueue_work", "project": "P"}))["item_id"]
        with statements(self.store) as sent:
            got = await _ok(self.service, {"type": "claim_next_work", "session_id": self.sids[3], "project": "P"})
        assert got["item"]["item_id"] == plain, got  # the cap leaves only the item without an issue
        return len(sent)


async def test_a_pull_at_the_cap_does_not_read_the_queue_item_by_item(store: Any) -> None:
    cap = _AtCap(store)
    await cap.start()
    await cap.queue_on_issues(300)
    # The session, the stale workers, the first page, the first issue and the cap, the
    # caller's leases, one page of the items without an issue, the writes: a few dozen at
    # most (SQLite counts BEGIN and each projection's write), where reading every item
    # cost ~1,800.
    assert await cap.pull() <= 30


async def test_a_pull_at_the_cap_costs_the_same_with_30_or_300_items_ahead(store: Any) -> None:
    cap = _AtCap(store)
    await cap.start()
    await cap.queue_on_issues(30)
    with_30 = await cap.pull()
    await cap.queue_on_issues(270)
    assert await cap.pull() == with_30
