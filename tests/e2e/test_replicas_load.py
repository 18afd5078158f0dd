"""Three ``eventcoord serve`` replicas on one PostgreSQL under 54 concurrent clients for ~10 s.

Claims, releases, exclusive file claims over overlapping directories and globs, and queue
traffic, all at once on three replicas. Afterwards, from the event log alone: never two
live leases on one issue, never two overlapping live exclusive file claims, never a
project over its cap, every queue transition from the right status, every acknowledged
event present, positions contiguous; and a rebuild from position 0 equals the live read
models.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.helpers import ServerProcess
from tests.load import Workload, check_log, read_log, rebuild_equals_live

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # replicas share one database only on PostgreSQL

#: Rate limits are admission control per process; this test is about the database's decisions.
NO_LIMITS = {"EVENTCOORD_RATE_LIMITS": "off"}


async def test_three_replicas_under_mixed_load_keep_every_promise(
    db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    servers = [start_server(extra_env=NO_LIMITS) for _ in range(3)]
    work = Workload([s.base_url for s in servers], clients=54, seconds=10.0)
    await work.prepare()
    tally = await work.run()

    assert not tally.unexpected, tally.unexpected[:10]
    assert not tally.transport_errors, tally.transport_errors
    assert all(status < 500 for status in tally.statuses), tally.statuses
    print(f"answers {dict(tally.statuses)}; refusals {dict(tally.codes)}; commands {dict(tally.kinds)}")
    # The load really contended (54 clients on 24 issues and 11 overlapping paths).
    for code in ("ISSUE_HELD", "FILES_CLAIMED"):
        assert tally.codes[code] > 0, (code, tally.codes)

    logs = [await read_log(s.base_url) for s in servers]
    assert logs[0] == logs[1] == logs[2]  # one log, served the same by every replica
    broken, types = check_log(logs[0], work.wip_limits, tally.acknowledged)
    assert not broken, broken[:10]
    print(f"log: {len(logs[0])} events {dict(types)}")
    for t in (
        "LeaseGranted",
        "LeaseReleased",
        "FilesClaimed",
        "FileClaimReleased",
        "ClaimConflict",
        "WorkEnqueued",
        "WorkClaimed",
    ):
        assert types[t] > 0, (t, types)
    for s in servers:
        s.stop()
    await rebuild_equals_live(db_url)
