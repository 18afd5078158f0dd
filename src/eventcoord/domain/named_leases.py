"""Named leases (leader election, capacity slots): acquire, renew, release. Pure, no I/O.

With ``capacity`` N (fixed by the first acquire, docs/protocol.md#capacity) a name has up
to N holders, each a slot with its own fencing token; with the default 1 it is the leader
lease below. The rules are docs/protocol.md#named-lease-rules (``ttl_seconds`` defaults to
30); the holder of record may still renew or release after expiry, as long as nobody else
has acquired the name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from eventcoord import errors
from eventcoord.codec import format_time
from eventcoord.commands import AcquireLease, ReleaseLease, RenewLease
from eventcoord.context import Context, Decision, Draft
from eventcoord.domain import refusals, streams, waits
from eventcoord.domain.handoff import LeaseLine, hand_off_lease
from eventcoord.domain.sessions import Claimant, SessionState, require_live, require_not_ended
from eventcoord.domain.waits import Waiter
from eventcoord.events import NamedLeaseAcquired, NamedLeaseReleased, NamedLeaseRenewed, WaitStarted

DEFAULT_LEASE_TTL_SECONDS = 30


@dataclass(frozen=True, slots=True)
class NamedLeaseState:
    """The last grant of a named lease (``session_id`` None once released)."""

    name: str
    session_id: str | None
    actor_key: str | None
    fencing_token: int
    ttl_seconds: int
    expires_us: int | None


@dataclass(frozen=True, slots=True)
class Slot:
    """One holder of a named lease."""

    session_id: str
    actor_key: str | None
    fencing_token: int
    ttl_seconds: int
    expires_us: int


@dataclass(frozen=True, slots=True)
class NamedLeaseCommandState:
    """What acquire/renew/release_lease decide on: the caller (locked) and the lease (locked).

    ``slots`` are the current holders (None: the one holder of ``lease``, if any);
    ``capacity`` the name's fixed capacity (None: never acquired); ``line`` its waiters;
    """

    session: SessionState | None
    lease: NamedLeaseState | None
    slots: Sequence[Slot] | None = None
    capacity: int | None = None
    line: Sequence[Waiter] = ()

    def holders(self) -> list[Slot]:
        if self.slots is not None:
            return list(self.slots)
        lease = self.lease
        if lease is None or lease.session_id is None:
            return []
        return [Slot(lease.session_id, lease.actor_key, lease.fencing_token, lease.ttl_seconds, lease.expires_us or 0)]


def _lease_result(name: str, token: int, ttl_seconds: int, expires_us: int, renewed: bool) -> dict[str, Any]:
    return {
        "name": name,
        "fencing_token": token,
        "ttl_seconds": ttl_seconds,
        "expires_at": format_time(expires_us),
        "renewed": renewed,
    }


def _not_holder(name: str, me: SessionState, lease: NamedLeaseState | None) -> errors.DomainError:
    return refusals.not_lease_holder(name, me.session_id, lease.session_id if lease else None)


def decide_acquire_lease(state: NamedLeaseCommandState, cmd: AcquireLease, ctx: Context) -> Decision:
    """Grant a slot of the name if one is free, expired or already ours (a renewal); else
    LEASE_HELD (joining the line with ``wait``). Waiters ahead of the caller are served first."""
    me = require_live(state.session, cmd.session_id, ctx)
    name, lease = cmd.name, state.lease
    capacity = state.capacity or 1
    if cmd.capacity is not None and state.capacity is not None and cmd.capacity != state.capacity:
        raise errors.invalid("capacity", f"lease {name!r} has capacity {state.capacity}, fixed by its first acquire")
    if state.capacity is None and cmd.capacity is not None:
        capacity = cmd.capacity
    d = Draft(session_id=me.session_id, actor_key=me.actor_key)
    slots = state.holders()
    mine = next((x for x in slots if x.session_id == me.session_id), None)
    if mine is not None:
        return _renew(
            name,
            NamedLeaseState(
                name, mine.session_id, mine.actor_key, mine.fencing_token, mine.ttl_seconds, mine.expires_us
            ),
            me,
            cmd.ttl_seconds,
            ctx,
            d,
        )
    live = [x for x in slots if x.expires_us > ctx.now_us]
    expired = [x for x in slots if x.expires_us <= ctx.now_us]
    token = lease.fencing_token if lease else max((x.fencing_token for x in slots), default=0)
    line = [w for w in state.line if w.session_id != me.session_id]
    ahead = line[: next((i for i, w in enumerate(state.line) if w.session_id == me.session_id), len(line))]
    free = capacity - len(live)
    if free > 0 and ahead:
        for x in expired:
            d.add(streams.named_lease(name), NamedLeaseReleased(name=name, session_id=x.session_id, reason="expired"))
        expired = []
        served = hand_off_lease(
            d, LeaseLine(name, token, free, capacity, ahead), Claimant(me.session_id, me.actor_key), ctx
        )
        token += len(served)
        free -= len(served)
        live += [Slot(w.session_id, w.actor_key, 0, 0, ctx.now_us + 1) for w in served]
    if free <= 0:
        first = live[0]
        refusal = refusals.lease_held(name, first.session_id, first.actor_key, format_time(first.expires_us))
        if capacity > 1:
            refusal.details["capacity"] = capacity
        if cmd.wait:  # the handler then joins the line (docs/protocol.md#waiting)
            started = WaitStarted(
                kind="lease",
                key=name,
                session_id=me.session_id,
                actor_key=me.actor_key,
                ttl_seconds=cmd.ttl_seconds,
                capacity=cmd.capacity,
            )
            return waits.asks_to_join(d, started, refusal, [x.session_id for x in live], None)
        if d.events:
            d.error = refusal
            return d.decided()
        raise refusal
    for x in expired[: max(0, len(live) + len(expired) - capacity + 1)]:
        d.add(streams.named_lease(name), NamedLeaseReleased(name=name, session_id=x.session_id, reason="expired"))
    ttl = cmd.ttl_seconds or DEFAULT_LEASE_TTL_SECONDS
    token += 1
    expires = ctx.now_us + ttl * 1_000_000
    d.add(
        streams.named_lease(name),
        NamedLeaseAcquired(
            name=name,
            session_id=me.session_id,
            actor_key=me.actor_key,
            fencing_token=token,
            ttl_seconds=ttl,
            expires_at_us=expires,
            capacity=capacity if capacity > 1 else UNSET,
        ),
    )
    d.result = _lease_result(name, token, ttl, expires, renewed=False)
    if capacity > 1:
        d.result["capacity"] = capacity
    return d.decided()


def _renew(
    name: str, lease: NamedLeaseState, me: SessionState, ttl_seconds: int | None, ctx: Context, d: Draft
) -> Decision:
    ttl = ttl_seconds or lease.ttl_seconds or DEFAULT_LEASE_TTL_SECONDS
    expires = ctx.now_us + ttl * 1_000_000
    d.add(
        streams.named_lease(name),
        NamedLeaseRenewed(
            name=name,
            session_id=me.session_id,
            fencing_token=lease.fencing_token,
            ttl_seconds=ttl,
            expires_at_us=expires,
        ),
    )
    d.result = _lease_result(name, lease.fencing_token, ttl, expires, renewed=True)
    return d.decided()


def _my_slot(state: NamedLeaseCommandState, name: str, me: SessionState) -> NamedLeaseState:
    mine = next((x for x in state.holders() if x.session_id == me.session_id), None)
    if mine is None:
        raise _not_holder(name, me, state.lease)
    return NamedLeaseState(name, mine.session_id, mine.actor_key, mine.fencing_token, mine.ttl_seconds, mine.expires_us)


def decide_renew_lease(state: NamedLeaseCommandState, cmd: RenewLease, ctx: Context) -> Decision:
    """Extend our lease from now (same token); NOT_HOLDER if it is not ours."""
    me = require_not_ended(state.session, cmd.session_id)
    lease = _my_slot(state, cmd.name, me)
    return _renew(cmd.name, lease, me, cmd.ttl_seconds, ctx, Draft(session_id=me.session_id, actor_key=me.actor_key))


def decide_release_lease(state: NamedLeaseCommandState, cmd: ReleaseLease, ctx: Context) -> Decision:
    """Give our lease up; the token stays as the last one granted."""
    me = require_not_ended(state.session, cmd.session_id)
    name = cmd.name
    lease = _my_slot(state, name, me)
    d = Draft(session_id=me.session_id, actor_key=me.actor_key)
    d.add(streams.named_lease(name), NamedLeaseReleased(name=name, session_id=me.session_id, reason="released"))
    d.result = {
        "name": name,
        "fencing_token": lease.fencing_token,
        "ttl_seconds": lease.ttl_seconds,
        "expires_at": format_time(ctx.now_us),
        "released": True,
    }
    if state.line:
        capacity = state.capacity or 1
        others = [x for x in state.holders() if x.session_id != me.session_id and x.expires_us > ctx.now_us]
        last = state.lease.fencing_token if state.lease else lease.fencing_token
        line = LeaseLine(name, last, capacity - len(others), capacity, state.line)
        served = hand_off_lease(d, line, Claimant(me.session_id, me.actor_key), ctx)
        d.result["handed_off_to"] = [w.session_id for w in served]
    return d.decided()
