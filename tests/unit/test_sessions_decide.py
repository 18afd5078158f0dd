"""Agent sessions, decided without a database: identity, register, heartbeat, end, sanitising."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET

from eventcoord.codec import encode, encode_event_data
from eventcoord.commands import EndAgent, HeartbeatAgent, RegisterAgent
from eventcoord.context import Caller, Context
from eventcoord.domain import sessions as domain
from eventcoord.domain.ending import EndState, Holdings, decide_end_agent
from eventcoord.domain.sessions import HeartbeatState, SessionState
from eventcoord.errors import DomainError
from eventcoord.events import (
    AgentEnded,
    AgentHeartbeat,
    AgentRegistered,
    FileClaimReleased,
    HandoffNoted,
    LeaseReleased,
    NamedLeaseReleased,
    WorkRequeued,
)
from eventcoord.sanitize import ACTOR_CAP, BODY_CAP, HOST_CAP, clean_line, clean_text

NOW = 1_800_000_000_000_000  # microseconds
TTL = 120
SID = "s-0123456789abcdef0123456789abcdef"
RAW_RUNTIME_ID = "raw-thread-id-7d1c0e9f-SECRET"
C0 = "".join(chr(c) for c in range(0x00, 0x20))
C1 = "".join(chr(c) for c in range(0x80, 0xA0))
#: Invisible characters that make text lie: bidirectional controls and zero-width ones.
INVISIBLE = "\u200b\u200c\u200d\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"
ALL_CONTROL = C0 + "\x7f" + C1 + INVISIBLE


def ctx(role: str = "agent", now_us: int = NOW) -> Context:
    return Context(Caller("default", role), now_us, TTL, make_id=lambda prefix: SID)  # type: ignore[arg-type]


def session(*, last_seen_us: int = NOW, ended_us: int | None = None, working_on: str | None = None) -> SessionState:
    return SessionState(
        session_id=SID,
        actor_key="alice",
        kind="agent",
        stable=True,
        identity_source="explicit-override",
        host="h1",
        last_seen_us=last_seen_us,
        ended_us=ended_us,
        working_on=working_on,
    )


def registered(**fields: object) -> tuple[AgentRegistered, dict[str, object]]:
    """Decide a register_agent; return its one event and the result."""
    d = domain.decide_register_agent(None, RegisterAgent(**fields), ctx("admin"))  # type: ignore[arg-type]
    assert d.error is None
    assert [stream for stream, _ in d.events] == [f"session:{SID}"]
    event = d.events[0][1]
    assert isinstance(event, AgentRegistered)
    assert d.result["actor_key"] == event.actor_key
    assert d.result["identity_source"] == event.identity_source
    assert d.result["stable"] is event.stable
    assert d.result["session_id"] == SID == event.session_id
    assert d.result["ttl_seconds"] == TTL
    return event, d.result


def thread_digest(raw: str) -> str:
    return hashlib.sha256(("eventcoord:" + raw).encode()).hexdigest()[:24]


# --- identity resolution (docs/protocol.md#identity) ---------------------------------------


def test_explicit_actor_is_the_bare_token_and_stable() -> None:
    event, _ = registered(actor="alice", host="build-7")
    assert event.actor_key == "alice"
    assert event.identity_source == "explicit-override"
    assert event.stable is True
    assert event.host == "build-7"


def test_explicit_actor_is_sanitised_and_never_cut_nor_replaced() -> None:
    event, _ = registered(actor="al\x00ice\x1b[31m\x7f\x9b\u202egnp.exe\u200b" + "x" * 40)
    assert event.actor_key == "alice[31mgnp.exe" + "x" * 40
    # Too long, empty, or empty once sanitised: refused, never cut to another name nor
    # replaced by another identity source.
    for actor in ("a" * (ACTOR_CAP + 1), "", "\x00\x01\x9f", "\u202e\u200b"):
        with pytest.raises(DomainError) as e:
            domain.decide_register_agent(None, RegisterAgent(actor=actor, process_ancestry="abc"), ctx())
        assert e.value.code == "VALIDATION" and e.value.details["field"] == "actor"
    assert registered(actor="a" * ACTOR_CAP)[0].actor_key == "a" * ACTOR_CAP


def test_runtime_session_id_gives_a_stable_digest_key_and_never_stores_the_raw_id() -> None:
    event, result = registered(runtime="claude-code", runtime_session_id=RAW_RUNTIME_ID, host="laptop")
    assert event.actor_key == f"claude-code:thread-{thread_digest(RAW_RUNTIME_ID)}:laptop"
    assert re.fullmatch(r"claude-code:thread-[0-9a-f]{24}:laptop", event.actor_key)
    assert event.identity_source == "runtime-session-id:claude-code"
    assert event.stable is True
    assert event.host == "laptop"
    # The raw id appears nowhere: not in the event data, not in the answer.
    assert RAW_RUNTIME_ID.encode() not in encode_event_data(event)
    assert RAW_RUNTIME_ID.encode() not in encode(result)


def test_runtime_key_is_deterministic_and_distinguishes_ids_and_hosts() -> None:
    a, _ = registered(runtime="codex", runtime_session_id="t-1", host="h")
    b, _ = registered(runtime="codex", runtime_session_id="t-1", host="h")
    c, _ = registered(runtime="codex", runtime_session_id="t-2", host="h")
    d, _ = registered(runtime="codex", runtime_session_id="t-1", host="other")
    assert a.actor_key == b.actor_key
    assert len({a.actor_key, c.actor_key, d.actor_key}) == 3


def test_runtime_key_digest_is_domain_separated() -> None:
    event, _ = registered(runtime="codex", runtime_session_id="t-1", host="h")
    plain = hashlib.sha256(b"t-1").hexdigest()[:24]
    assert plain not in event.actor_key
    assert thread_digest("t-1") in event.actor_key


def test_process_ancestry_is_unstable() -> None:
    event, _ = registered(process_ancestry="9f86d081884c7d65", host="ci-3")
    assert event.actor_key == "process-ancestry:anc-9f86d081884c7d65:ci-3"
    assert event.identity_source == "process-ancestry"
    assert event.stable is False


def test_unresolved_names_the_session_and_is_unstable() -> None:
    event, _ = registered(host="somewhere")
    assert event.actor_key == f"unresolved:{SID}"
    assert event.identity_source == "unresolved"
    assert event.stable is False
    assert event.host == "somewhere"


@pytest.mark.parametrize(
    ("fields", "source"),
    [
        (
            {"actor": "bob", "runtime": "codex", "runtime_session_id": "t", "process_ancestry": "abc"},
            "explicit-override",
        ),
        ({"runtime": "codex", "runtime_session_id": "t", "process_ancestry": "abc"}, "runtime-session-id:codex"),
        ({"process_ancestry": "abc"}, "process-ancestry"),
        ({}, "unresolved"),
    ],
)
def test_identity_sources_in_strict_priority(fields: dict[str, str], source: str) -> None:
    event, _ = registered(host="h", **fields)
    assert event.identity_source == source
    assert event.stable is (source in ("explicit-override", "runtime-session-id:codex"))


def test_host_is_sanitised_and_capped_and_recorded() -> None:
    event, _ = registered(actor="a", host="h\x00o\x85st" + "y" * 200)
    assert event.host == ("host" + "y" * 200)[:HOST_CAP]


def test_register_carries_kind_and_working_on() -> None:
    event, _ = registered(actor="a", kind="human", working_on="ISS-1")
    assert event.kind == "human"
    assert event.working_on == "ISS-1"


@pytest.mark.parametrize("role", ["agent", "reader"])
def test_human_session_needs_a_human_or_admin_token(role: str) -> None:
    with pytest.raises(DomainError) as e:
        domain.decide_register_agent(None, RegisterAgent(kind="human"), ctx(role))
    assert e.value.code == "FORBIDDEN"


@pytest.mark.parametrize("role", ["human", "admin"])
def test_human_or_admin_may_register_a_human_session(role: str) -> None:
    d = domain.decide_register_agent(None, RegisterAgent(kind="human"), ctx(role))
    assert isinstance(d.events[0][1], AgentRegistered) and d.events[0][1].kind == "human"


# --- heartbeat ------------------------------------------------------------------------


def test_heartbeat_of_a_live_session_appends_one_heartbeat() -> None:
    d = domain.decide_heartbeat_agent(HeartbeatState(session(), []), HeartbeatAgent(session_id=SID), ctx())
    assert d.events == [(f"session:{SID}", AgentHeartbeat(session_id=SID))]
    assert d.session_id == SID and d.actor_key == "alice"
    assert set(d.result) == {"last_heartbeat_at"}


def test_heartbeat_of_a_stale_session_revives_it() -> None:
    stale = session(last_seen_us=NOW - (TTL + 60) * 1_000_000)
    assert not ctx().is_live(stale.last_seen_us, stale.ended_us)
    d = domain.decide_heartbeat_agent(HeartbeatState(stale, []), HeartbeatAgent(session_id=SID), ctx())
    assert [type(e) for _, e in d.events] == [AgentHeartbeat]


def test_heartbeat_of_an_ended_session_is_refused() -> None:
    with pytest.raises(DomainError) as e:
        domain.decide_heartbeat_agent(
            HeartbeatState(session(ended_us=NOW - 1), []), HeartbeatAgent(session_id=SID), ctx()
        )
    assert e.value.code == "SESSION_NOT_LIVE"
    assert e.value.details["session_id"] == SID


def test_heartbeat_of_an_unknown_session_is_not_found() -> None:
    with pytest.raises(DomainError) as e:
        domain.decide_heartbeat_agent(HeartbeatState(None, []), HeartbeatAgent(session_id=SID), ctx())
    assert e.value.code == "NOT_FOUND"


@pytest.mark.parametrize(("given", "expected"), [(UNSET, UNSET), (None, None), ("ISS-9", "ISS-9")])
def test_heartbeat_working_on_keep_clear_or_declare(given: object, expected: object) -> None:
    cmd = HeartbeatAgent(session_id=SID, working_on=given)  # type: ignore[arg-type]
    d = domain.decide_heartbeat_agent(HeartbeatState(session(working_on="ISS-1"), []), cmd, ctx())
    event = d.events[0][1]
    assert isinstance(event, AgentHeartbeat)
    if isinstance(expected, str):
        assert event.working_on == expected
    else:
        assert event.working_on is expected


def test_heartbeat_working_on_absent_or_null_differs_in_the_event_data() -> None:
    kept = encode_event_data(AgentHeartbeat(session_id=SID))
    cleared = encode_event_data(AgentHeartbeat(session_id=SID, working_on=None))
    assert b"working_on" not in kept
    assert b'"working_on":null' in cleared


def test_heartbeat_handoff_note_goes_to_every_held_issue_sanitised() -> None:
    cmd = HeartbeatAgent(session_id=SID, handoff_note="line1\n\tline2\r\x00\x9b" + "z" * 5000)
    d = domain.decide_heartbeat_agent(HeartbeatState(session(), ["ISS-1", "ISS-2"]), cmd, ctx())
    notes = [(stream, e) for stream, e in d.events if isinstance(e, HandoffNoted)]
    assert [stream for stream, _ in notes] == ["issue:ISS-1", "issue:ISS-2"]
    for _, e in notes:
        assert e.note == ("line1\n\tline2" + "z" * 5000)[:BODY_CAP]
        assert e.session_id == SID


def test_heartbeat_handoff_note_without_leases_goes_to_the_declared_issue() -> None:
    declared = domain.decide_heartbeat_agent(
        HeartbeatState(session(working_on="ISS-4"), []), HeartbeatAgent(session_id=SID, handoff_note="n"), ctx()
    )
    assert [(s, type(e)) for s, e in declared.events][1:] == [("issue:ISS-4", HandoffNoted)]
    newly = domain.decide_heartbeat_agent(
        HeartbeatState(session(), []), HeartbeatAgent(session_id=SID, working_on="ISS-5", handoff_note="n"), ctx()
    )
    assert [s for s, _ in newly.events][1:] == ["issue:ISS-5"]
    nowhere = domain.decide_heartbeat_agent(
        HeartbeatState(session(), []), HeartbeatAgent(session_id=SID, handoff_note="n"), ctx()
    )
    assert [type(e) for _, e in nowhere.events] == [AgentHeartbeat]


# --- end ------------------------------------------------------------------------------


NOTHING = Holdings([], {}, [], [])


def test_end_of_a_live_or_stale_session_closes_it_with_a_sanitised_note() -> None:
    for s in (session(), session(last_seen_us=NOW - (TTL + 1) * 1_000_000)):
        d = decide_end_agent(EndState(s, NOTHING), EndAgent(session_id=SID, handoff_note="done\n\x07ok"), ctx())
        assert d.session_id == SID and d.actor_key == "alice"
        assert d.events == [(f"session:{SID}", AgentEnded(session_id=SID, handoff_note="done\nok"))]


def test_end_of_an_ended_session_is_refused() -> None:
    with pytest.raises(DomainError) as e:
        decide_end_agent(EndState(session(ended_us=NOW), NOTHING), EndAgent(session_id=SID), ctx())
    assert e.value.code == "SESSION_NOT_LIVE"


def test_end_of_an_unknown_session_is_not_found() -> None:
    with pytest.raises(DomainError) as e:
        decide_end_agent(EndState(None, NOTHING), EndAgent(session_id=SID), ctx())
    assert e.value.code == "NOT_FOUND"


def test_end_releases_everything_held_in_order_with_the_note_after_each_lease() -> None:
    held = Holdings(
        leases=[("ISS-1", 4), ("ISS-2", 9)],
        file_claims={"ISS-1": ["src/a.py", "docs/"], "ISS-3": ["tests/"]},
        items=["w-2", "w-1"],
        named_leases=["dispatcher"],
    )
    d = decide_end_agent(EndState(session(), held), EndAgent(session_id=SID, handoff_note="bye\x1b"), ctx())
    assert d.events == [
        ("issue:ISS-1", LeaseReleased(issue="ISS-1", session_id=SID, reason="agent_ended", fencing_token=4)),
        ("issue:ISS-1", HandoffNoted(issue="ISS-1", session_id=SID, note="bye")),
        ("issue:ISS-2", LeaseReleased(issue="ISS-2", session_id=SID, reason="agent_ended", fencing_token=9)),
        ("issue:ISS-2", HandoffNoted(issue="ISS-2", session_id=SID, note="bye")),
        (
            "files:ISS-1",
            FileClaimReleased(issue="ISS-1", session_id=SID, paths=["src/a.py", "docs/"], reason="agent_ended"),
        ),
        ("files:ISS-3", FileClaimReleased(issue="ISS-3", session_id=SID, paths=["tests/"], reason="agent_ended")),
        ("work:w-2", WorkRequeued(item_id="w-2", session_id=SID, reason="agent_ended")),
        ("work:w-1", WorkRequeued(item_id="w-1", session_id=SID, reason="agent_ended")),
        ("lease:dispatcher", NamedLeaseReleased(name="dispatcher", session_id=SID, reason="agent_ended")),
        (f"session:{SID}", AgentEnded(session_id=SID, handoff_note="bye")),
    ]
    assert d.result == {
        "released_leases": ["ISS-1", "ISS-2"],
        "released_claims": ["src/a.py", "docs/", "tests/"],
        "requeued_items": ["w-2", "w-1"],
        "released_named_leases": ["dispatcher"],
    }


def test_end_without_a_note_records_no_handoff() -> None:
    held = Holdings([("ISS-1", 1)], {}, [], [])
    d = decide_end_agent(EndState(session(), held), EndAgent(session_id=SID), ctx())
    assert [type(e) for _, e in d.events] == [LeaseReleased, AgentEnded]


# --- liveness ---------------------------------------------------------------------------


def test_liveness_is_not_ended_and_seen_within_the_ttl() -> None:
    c = ctx()
    assert c.is_live(NOW, None)
    assert c.is_live(NOW - TTL * 1_000_000 + 1, None)
    assert not c.is_live(NOW - TTL * 1_000_000, None)
    assert not c.is_live(NOW, NOW)


def test_require_live_refuses_ended_and_stale_sessions() -> None:
    assert domain.require_live(session(), SID, ctx()).session_id == SID
    for s, ended in ((session(ended_us=NOW), True), (session(last_seen_us=NOW - (TTL + 5) * 1_000_000), False)):
        with pytest.raises(DomainError) as e:
            domain.require_live(s, SID, ctx())
        assert e.value.code == "SESSION_NOT_LIVE"
        assert e.value.details == {"session_id": SID, "ended": ended}


# --- sanitising -------------------------------------------------------------------------


def test_clean_line_strips_c0_del_c1_then_caps() -> None:
    assert clean_line("a" + ALL_CONTROL + "b", ACTOR_CAP) == "ab"
    assert clean_line("\x00" * 100 + "x" * 100, 64) == "x" * 64
    assert clean_line("tab\there\nnew", HOST_CAP) == "tabherenew"
    assert clean_line(None, 64) is None
    # Just outside the control ranges: kept.
    assert clean_line("\x20\x7e\xa0\u2028é", 64) == "\x20\x7e\xa0\u2028é"


def test_clean_text_keeps_newline_and_tab_only() -> None:
    assert clean_text("a\nb\tc" + ALL_CONTROL.replace("\n", "").replace("\t", "") + "d") == "a\nb\tcd"
    assert clean_text("\r\n") == "\n"
    assert clean_text("y" * (BODY_CAP + 10)) == "y" * BODY_CAP
    assert clean_text(None) is None


@given(st.text(), st.sampled_from([ACTOR_CAP, HOST_CAP, BODY_CAP]))
def test_clean_line_property(value: str, cap: int) -> None:
    out = clean_line(value, cap)
    assert out is not None
    assert len(out) <= cap
    assert not any(ch in ALL_CONTROL for ch in out)
    assert out == "".join(ch for ch in value if ch not in ALL_CONTROL)[:cap]


@given(st.text())
def test_clean_text_property(value: str) -> None:
    out = clean_text(value)
    assert out is not None
    assert len(out) <= BODY_CAP
    assert out == "".join(ch for ch in value if ch in "\n\t" or ch not in ALL_CONTROL)[:BODY_CAP]


@given(
    actor=st.none() | st.text(max_size=300),
    host=st.none() | st.text(max_size=300),
    runtime_session_id=st.none() | st.text(min_size=1, max_size=100),
    process_ancestry=st.none() | st.text(max_size=100),
)
def test_registered_event_fields_are_always_clean(
    actor: str | None, host: str | None, runtime_session_id: str | None, process_ancestry: str | None
) -> None:
    cmd = RegisterAgent(
        actor=actor, host=host, runtime="rt", runtime_session_id=runtime_session_id, process_ancestry=process_ancestry
    )
    visible = None if actor is None else "".join(ch for ch in actor if ch not in ALL_CONTROL)
    if visible is not None and not 0 < len(visible) <= ACTOR_CAP:
        with pytest.raises(DomainError) as e:
            domain.decide_register_agent(None, cmd, ctx())
        assert e.value.details["field"] == "actor"
        return
    d = domain.decide_register_agent(None, cmd, ctx())
    event = d.events[0][1]
    assert isinstance(event, AgentRegistered)
    for value in (event.actor_key, event.host or ""):
        assert not any(ch in ALL_CONTROL for ch in value)
    assert event.host is None or len(event.host) <= HOST_CAP
    if event.identity_source == "explicit-override":
        assert 0 < len(event.actor_key) <= ACTOR_CAP
    assert event.stable is (event.identity_source in ("explicit-override", "runtime-session-id:rt"))
