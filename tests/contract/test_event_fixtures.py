"""Stored events keep decoding as event types evolve (docs/events.md "Evolving an event").

``tests/fixtures/events/v<N>.jsonl`` are whole logs as stores of that time wrote them (the
``/v1/events`` objects), one file per shape version, never rewritten
(``python -m tests.fixtures.events.generate v<N+1>`` adds the next). Every line of every
version must decode with today's code, lose no stored field, and every version must replay
into an empty store whose rebuilt read models pass ``rebuild --check``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventcoord import codec, projections
from eventcoord.codec import decode_event, encode_event_data
from eventcoord.events import EVENT_TYPES
from eventcoord.history import transfer
from eventcoord.history.check import check

FIXTURES = Path(__file__).parent.parent / "fixtures" / "events"
VERSIONS = sorted(FIXTURES.glob("v*.jsonl"), key=lambda p: int(p.stem[1:]))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_there_is_a_fixture_and_together_the_versions_hold_every_event_type() -> None:
    assert VERSIONS and VERSIONS[0].name == "v1.jsonl"
    seen = {e["type"] for v in VERSIONS for e in lines(v)}
    missing = set(EVENT_TYPES) - seen
    assert not missing, f"add a fixture version holding {sorted(missing)} (tests/fixtures/events/generate.py)"


@pytest.mark.parametrize("version", VERSIONS, ids=lambda p: p.stem)
def test_every_stored_event_of_every_version_decodes_and_keeps_its_fields(version: Path) -> None:
    for e in lines(version):
        event = decode_event(e["type"], json.dumps(e["data"]))
        again = json.loads(encode_event_data(event))
        # Nothing stored is lost: every stored field is still a field with the same value
        # (fields added since carry their defaults).
        for key, value in e["data"].items():
            assert again.get(key) == value, (version.name, e["position"], e["type"], key)


def test_an_upcaster_maps_an_old_shape_to_todays(monkeypatch: pytest.MonkeyPatch) -> None:
    released = next(e for e in lines(VERSIONS[0]) if e["type"] == "LeaseReleased")
    old = dict(released["data"])
    old["why"] = old.pop("reason")  # as if "reason" had once been stored as "why"
    with pytest.raises(msgspec.ValidationError):
        decode_event("LeaseReleased", json.dumps(old))

    def upcast(data: dict[str, Any]) -> dict[str, Any]:
        if "why" in data:
            data = {**data, "reason": data["why"]}
            del data["why"]
        return data

    monkeypatch.setitem(codec.UPCASTERS, "LeaseReleased", upcast)
    assert decode_event("LeaseReleased", json.dumps(old)) == decode_event("LeaseReleased", json.dumps(released["data"]))


@pytest.mark.parametrize("version", VERSIONS, ids=lambda p: p.stem)
async def test_every_version_replays_into_an_empty_store_and_rebuilds_cleanly(store: Any, version: Path) -> None:
    def load(conn: Any) -> int:
        n = transfer.replay(conn, transfer.read_lines([str(version)]))
        projections.rebuild(conn)
        return n

    assert await store.transact(load, retry=False) == len(lines(version))
    _, diffs = await check(store)
    assert diffs == []
