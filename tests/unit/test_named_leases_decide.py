"""Named leases (leader election), decided without a database."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.unit.givens import NOW, SECOND, TTL, code_of, ctx, session

from eventcoord.codec import format_time
from eventcoord.commands import AcquireLease, ReleaseLease, RenewLease
from eventcoord.context import Context, Decision
from eventcoord.domain import named_leases as domain
from eventcoord.domain.named_leases import NamedLeaseCommandState, NamedLeaseState
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError
from eventcoord.events import NamedLeaseAcquired, NamedLeaseReleased, NamedLeaseRenewed


def acquire(name: str, lease: NamedLeaseState | None, me: SessionState, ttl: int | None, c: Context) -> Decision:
    cmd = AcquireLease(session_id=me.session_id, name=name, ttl_seconds=ttl)
    return domain.decide_acquire_lease(NamedLeaseCommandState(me, lease), cmd, c)


def renew(name: str, lease: NamedLeaseState | None, me: SessionState, ttl: int | None, c: Context) -> Decision:
    cmd = RenewLease(session_id=me.session_id, name=name, ttl_seconds=ttl)
    return domain.decide_renew_lease(NamedLeaseCommandState(me, lease), cmd, c)


def release(name: str, lease: NamedLeaseState | None, me: SessionState, c: Context) -> Decision:
    return domain.decide_release_lease(
        NamedLeaseCommandState(me, lease), ReleaseLease(session_id=me.session_id, name=name), c
    )


def lease(holder: str | None, token: int, expires_us: int | None, ttl: int = 30) -> NamedLeaseState:
    return NamedLeaseState("dispatcher", holder, f"actor-{holder}" if holder else None, token, ttl, expires_us)


def test_a_free_name_is_granted_with_the_default_ttl() -> None:
    d = acquire("dispatcher", None, session("s-a"), None, ctx())
    expires = NOW + domain.DEFAULT_LEASE_TTL_SECONDS * SECOND
    assert d.events == [
        (
            "lease:dispatcher",
            NamedLeaseAcquired(
                name="dispatcher",
                session_id="s-a",
                actor_key="actor-s-a",
                fencing_token=1,
                ttl_seconds=30,
                expires_at_us=expires,
            ),
        )
    ]
    assert d.result["fencing_token"] == 1 and d.result["expires_at"].endswith("Z") and d.session_id == "s-a"
    released = acquire("dispatcher", lease(None, 4, None), session("s-a"), 5, ctx())
    assert [type(e) for _, e in released.events] == [NamedLeaseAcquired] and released.result["fencing_token"] == 5


def test_a_live_lease_of_another_is_held() -> None:
    code, details = code_of(acquire, "dispatcher", lease("s-b", 3, NOW + 1), session("s-a"), None, ctx())
    assert code == "LEASE_HELD"
    assert details == {
        "name": "dispatcher",
        "session_id": "s-b",
        "actor_key": "actor-s-b",
        "expires_at": format_time(NOW + 1),
    }


def test_an_expired_lease_is_taken_over_with_a_higher_token() -> None:
    d = acquire("dispatcher", lease("s-b", 3, NOW), session("s-a"), 2, ctx())
    assert [e for _, e in d.events] == [
        NamedLeaseReleased(name="dispatcher", session_id="s-b", reason="expired"),
        NamedLeaseAcquired(
            name="dispatcher",
            session_id="s-a",
            actor_key="actor-s-a",
            fencing_token=4,
            ttl_seconds=2,
            expires_at_us=NOW + 2 * SECOND,
        ),
    ]


def test_reacquire_by_the_holder_renews_with_the_same_token() -> None:
    for expires in (NOW + SECOND, NOW - SECOND):
        d = acquire("dispatcher", lease("s-a", 3, expires, ttl=7), session("s-a"), None, ctx())
        assert [e for _, e in d.events] == [
            NamedLeaseRenewed(
                name="dispatcher", session_id="s-a", fencing_token=3, ttl_seconds=7, expires_at_us=NOW + 7 * SECOND
            )
        ]
        assert d.result["renewed"] is True and d.result["fencing_token"] == 3


def test_only_the_holder_renews_or_releases() -> None:
    for fn in (renew,):
        assert code_of(fn, "dispatcher", lease("s-b", 1, NOW + 1), session("s-a"), None, ctx())[0] == "NOT_HOLDER"
        assert code_of(fn, "dispatcher", None, session("s-a"), None, ctx())[0] == "NOT_HOLDER"
    assert code_of(release, "dispatcher", lease("s-b", 1, NOW + 1), session("s-a"), ctx())[0] == "NOT_HOLDER"
    assert code_of(release, "dispatcher", lease(None, 1, None), session("s-a"), ctx())[0] == "NOT_HOLDER"
    d = release("dispatcher", lease("s-a", 2, NOW + 1), session("s-a"), ctx())
    assert [e for _, e in d.events] == [NamedLeaseReleased(name="dispatcher", session_id="s-a", reason="released")]
    assert d.result["fencing_token"] == 2


def _evolve(state: NamedLeaseState | None, d: Decision) -> NamedLeaseState | None:
    """What the named_leases projection does with a decision's events."""
    for _, e in d.events:
        if isinstance(e, NamedLeaseAcquired):
            state = NamedLeaseState(e.name, e.session_id, e.actor_key, e.fencing_token, e.ttl_seconds, e.expires_at_us)
        elif isinstance(e, NamedLeaseRenewed) and state is not None:
            state = NamedLeaseState(
                state.name, state.session_id, state.actor_key, state.fencing_token, e.ttl_seconds, e.expires_at_us
            )
        elif isinstance(e, NamedLeaseReleased) and state is not None and state.session_id == e.session_id:
            state = NamedLeaseState(state.name, None, None, state.fencing_token, state.ttl_seconds, None)
    return state


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["acquire", "renew", "release"]),
            st.sampled_from(["s-a", "s-b", "s-c"]),
            st.integers(0, 3 * SECOND),
            st.integers(1, 3),
        ),
        max_size=40,
    )
)
def test_one_holder_at_a_time_and_tokens_only_grow(steps: list[tuple[str, str, int, int]]) -> None:
    state: NamedLeaseState | None = None
    now = NOW
    last_token = 0
    for op, sid, advance, ttl in steps:
        now += advance
        c = ctx(now)
        before = state
        try:
            if op == "acquire":
                d = acquire("dispatcher", state, session(sid, last_seen_us=now), ttl, c)
            elif op == "renew":
                d = renew("dispatcher", state, session(sid, last_seen_us=now), ttl, c)
            else:
                d = release("dispatcher", state, session(sid, last_seen_us=now), c)
        except DomainError as e:
            assert e.code in ("LEASE_HELD", "NOT_HOLDER")
            if e.code == "LEASE_HELD":  # refused only while another holds an unexpired lease
                assert before is not None and before.session_id not in (None, sid) and (before.expires_us or 0) > now
            continue
        state = _evolve(state, d)
        assert state is not None
        grants = [e for _, e in d.events if isinstance(e, NamedLeaseAcquired)]
        for g in grants:
            assert g.fencing_token == last_token + 1
            last_token = g.fencing_token
            # A grant never overlaps another session's unexpired lease.
            assert before is None or before.session_id in (None, sid) or (before.expires_us or 0) <= now
        if op != "release":
            assert state.session_id == sid and state.expires_us == now + ttl * SECOND
        assert state.fencing_token == last_token


def test_only_a_live_session_acquires_and_an_ended_one_renews_or_releases_nothing() -> None:
    stale = session("s-a", last_seen_us=NOW - TTL * SECOND)
    ended = session("s-a", ended_us=NOW - 1)
    assert code_of(acquire, "dispatcher", None, stale, None, ctx()) == (
        "SESSION_NOT_LIVE",
        {"session_id": "s-a", "ended": False},
    )
    assert code_of(acquire, "dispatcher", None, ended, None, ctx())[0] == "SESSION_NOT_LIVE"
    mine = lease("s-a", 2, NOW + SECOND)
    assert code_of(renew, "dispatcher", mine, ended, None, ctx()) == (
        "SESSION_NOT_LIVE",
        {"session_id": "s-a", "ended": True},
    )
    assert code_of(release, "dispatcher", mine, ended, ctx()) == (
        "SESSION_NOT_LIVE",
        {"session_id": "s-a", "ended": True},
    )
    # a stale holder may still renew (its command is a sign of life)
    assert [type(e) for _, e in renew("dispatcher", mine, stale, None, ctx()).events] == [NamedLeaseRenewed]
    unknown = NamedLeaseCommandState(None, None)
    assert (
        code_of(domain.decide_acquire_lease, unknown, AcquireLease(session_id="s-x", name="n"), ctx())[0] == "NOT_FOUND"
    )
    assert (
        code_of(domain.decide_release_lease, unknown, ReleaseLease(session_id="s-x", name="n"), ctx())[0] == "NOT_FOUND"
    )
