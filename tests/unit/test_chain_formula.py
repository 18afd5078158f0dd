"""The hash chain's formula and the log's checks, without a database (docs/protocol.md#the-hash-chain).

The fixture logs (``tests/fixtures/events``: every event type, as stores of each version
wrote them) are chained with the formula written out here, then checked: the server's fast
canonical form equals the formula's on every line, every fixture log passes, and each
tampering is refused at its position.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventcoord.codec import WireEvent, parse_time
from eventcoord.history import chain
from eventcoord.history.verify import Refused, verify

FIXTURES = sorted((Path(__file__).parent.parent / "fixtures" / "events").glob("v*.jsonl"))
ROOT = Path(__file__).parent.parent.parent


def formula(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events with ``hash`` set as the protocol's formula says, computed independently."""
    prev = ""
    out = []
    for o in objs:
        body = {k: v for k, v in o.items() if k != "hash"}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        prev = hashlib.sha256((prev + text).encode("utf-8")).hexdigest()
        out.append({**body, "hash": prev})
    return out


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wire(objs: list[dict[str, Any]]) -> list[WireEvent]:
    return [msgspec.json.decode(json.dumps(o).encode(), type=WireEvent) for o in objs]


def row(o: dict[str, Any]) -> tuple[Any, ...]:
    return (
        o["position"],
        o["stream"],
        o["version"],
        o["type"],
        json.dumps(o["data"]),
        json.dumps(o["metadata"]),
        parse_time(o["recorded_at"]),
    )


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_the_stored_rows_chain_to_the_formula(path: Path) -> None:
    objs = formula(load(path))
    got = list(chain.links(chain.GENESIS, 0, [row(o) for o in objs]))
    assert got == [(o["position"], o["hash"]) for o in objs]


def test_the_fast_form_spells_what_json_dumps_spells() -> None:
    tricky = 'é\u2028\u2029\x00\x1f"\\/<>&\U0001f600\t\n'
    o = {
        "position": 7,
        "stream": f"channel:{tricky}",
        "version": 1,
        "type": "MessagePosted",
        "data": {"channel": tricky, "body": tricky * 3, "session_id": None, "actor_key": "a"},
        "metadata": {"workspace": "default", "command_id": tricky},
        "recorded_at": "2026-12-01T08:39:16.502370Z",
    }
    free = {**o, "type": "WorkEnqueued", "data": {"payload": {"z": 1e16, "a": [1e-7, 0.1, 2**70]}}}
    for obj in (o, free):
        assert chain._row_canonical(row(obj)) == chain.canonical(obj)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_log_verifies(path: Path) -> None:
    objs = formula(load(path))
    v = verify(wire(objs))
    assert v.checked == len(objs) and v.prev_hash == objs[-1]["hash"]


def first(objs: list[dict[str, Any]], type_: str) -> int:
    return next(i for i, o in enumerate(objs) if o["type"] == type_)


def refused(objs: list[dict[str, Any]]) -> Refused:
    with pytest.raises(Refused) as e:
        verify(wire(objs))
    return e.value


def test_tampering_is_refused_at_its_position() -> None:
    log = formula(load(FIXTURES[-1]))

    # An edited fencing token, hashes left alone: the chain breaks there.
    naive = [dict(o) for o in log]
    i = first(naive, "LeaseGranted")
    naive[i]["data"] = {**naive[i]["data"], "fencing_token": 5}
    e = refused(naive)
    assert e.position == naive[i]["position"] and "chain breaks" in e.reason

    # The same with every hash recomputed: the grant does not take the next token.
    e = refused(formula(naive))
    assert e.position == naive[i]["position"] and "fencing token 5" in e.reason

    # A grant to a session never registered.
    ghost = [dict(o) for o in log]
    ghost[i]["data"] = {**ghost[i]["data"], "session_id": "s-ghost"}
    e = refused(formula(ghost))
    assert e.position == ghost[i]["position"] and "never registered" in e.reason

    # An event moved to another workspace.
    moved = [dict(o) for o in log]
    moved[i]["metadata"] = {**moved[i]["metadata"], "workspace": "elsewhere"}
    e = refused(formula(moved))
    assert e.position == moved[i]["position"] and "workspace 'elsewhere'" in e.reason

    # A release of a lease never granted.
    j = first(log, "LeaseReleased")
    never = [dict(o) for o in log]
    never[j]["data"] = {**never[j]["data"], "issue": "NEVER-1"}
    e = refused(formula(never))
    assert e.position == never[j]["position"] and "never granted" in e.reason

    # An unknown type.
    unknown = [dict(o) for o in log]
    unknown[3]["type"] = "AgentTeleported"
    e = refused(formula(unknown))
    assert e.position == unknown[3]["position"] and "unknown event type" in e.reason

    # A hash left out, an event removed.
    bare = [dict(o) for o in log]
    del bare[4]["hash"]
    assert refused(bare).position == bare[4]["position"]
    assert refused(log[:10] + log[11:]).position == log[11]["position"]


def snippet() -> str:
    text = (ROOT / "docs" / "history.md").read_text()
    m = re.search(r"<!-- check-chain -->\s*```python\n(.*?)```", text, re.S)
    assert m, "docs/history.md shows the chain check as a Python block after <!-- check-chain -->"
    return m.group(1)


def test_the_documented_snippet_checks_a_log(tmp_path: Path) -> None:
    code = snippet()
    assert len(code.strip().splitlines()) <= 10
    log = formula(load(FIXTURES[-1]))
    good = tmp_path / "log.jsonl"
    good.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in log))
    ok = subprocess.run([sys.executable, "-c", code, str(good)], capture_output=True, text=True)
    assert ok.returncode == 0 and log[-1]["hash"] in ok.stdout, ok.stderr
    bad = [dict(o) for o in log]
    bad[20]["data"] = {**bad[20]["data"], "tampered": True}
    worse = tmp_path / "bad.jsonl"
    worse.write_text("".join(json.dumps(o) + "\n" for o in bad))
    no = subprocess.run([sys.executable, "-c", code, str(worse)], capture_output=True, text=True)
    assert no.returncode == 1 and f"position {bad[20]['position']}" in no.stderr


def test_a_log_exported_before_the_chain_is_checked_for_all_but_the_chain() -> None:
    bare = load(FIXTURES[-1])  # the fixtures were written before events carried hashes
    assert "hash" not in bare[0]
    assert refused(bare).position == bare[0]["position"]
    assert verify(wire(bare), unchained=True).checked == len(bare)
    ghost = [dict(o) for o in bare]
    i = first(ghost, "LeaseGranted")
    ghost[i]["data"] = {**ghost[i]["data"], "session_id": "s-ghost"}
    with pytest.raises(Refused) as e:
        verify(wire(ghost), unchained=True)
    assert e.value.position == ghost[i]["position"]
