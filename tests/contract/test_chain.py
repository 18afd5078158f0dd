"""The stored hash chain on both backends (docs/protocol.md#the-hash-chain).

Pages of the log carry the formula's hashes whether the chainer has reached them or not;
two chainers (two replicas) store each link once; the links equal the formula's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import msgspec
from sqlalchemy import func, select
from tests.contract.test_rebuild import Driver, scripted_day

from eventcoord.history import chain
from eventcoord.history.chainer import Chainer
from eventcoord.history.logreads import Filters, page
from eventcoord.store import log, open_store
from eventcoord.store.schema import event_hashes


def formula(objs: list[dict[str, Any]]) -> dict[int, str]:
    prev, out = "", {}
    for o in objs:
        body = {k: v for k, v in o.items() if k != "hash"}
        prev = hashlib.sha256(
            (prev + json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)).encode()
        ).hexdigest()
        out[o["position"]] = prev
    return out


def stored(c: Any) -> dict[int, str]:
    return {int(p): str(h) for p, h in c.execute(select(event_hashes))}


async def test_pages_carry_the_formulas_hashes_chained_or_not(store: Any, db_url: str) -> None:
    await scripted_day(Driver(store))
    wire = await store.query(lambda c: log.read_wire(c, 0, 100000))
    expected = formula([json.loads(msgspec.json.encode(e)) for e in wire])
    head = await store.head()
    assert sorted(expected) == list(range(1, head + 1))
    # Nothing chained yet: every hash computed on demand, nothing stored by the read.
    assert await store.query(stored) == {}
    every = await store.query(lambda c: page(c, 0, 1000, "default", Filters()))
    assert every and all(e.hash == expected[e.position] for e in every)
    assert await store.query(stored) == {}
    # Partly chained: stored and computed hashes meet.
    first = Chainer(store, step=7)
    assert await first.step() == 7
    assert await store.query(stored) == {p: expected[p] for p in range(1, 8)}
    grants = await store.query(lambda c: page(c, 3, 1000, "default", Filters(types=("LeaseGranted",))))
    assert grants and all(e.hash == expected[e.position] for e in grants)
    # Two chainers of two processes at once: each link is stored once, and it is the formula's.
    other = open_store(db_url)
    await other.start()
    try:
        done = await asyncio.gather(Chainer(store, step=11).catch_up(), Chainer(other, step=5).catch_up())
    finally:
        await other.close()
    assert sum(done) >= head - 7
    assert await store.query(stored) == expected
    assert await store.query(lambda c: c.execute(select(func.count()).select_from(event_hashes)).scalar_one()) == head
    assert await store.query(chain.verify_stored) == (head, None)
    # The chain goes on with the log.
    d = Driver(store)
    await d.register(actor="late")
    assert await Chainer(store).catch_up() == 1
    assert (await store.query(chain.verify_stored))[1] is None
