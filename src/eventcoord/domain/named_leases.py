"""Named leases (leader election): acquire, renew, release. Pure, no I/O.

``ttl_seconds`` defaults to 30. ``acquire_lease`` wins when the name is
free, expired (``expires_at <= now``) or already the caller's (then it is a renewal:
``NamedLeaseRenewed``, same token); a new grant's token is the last one plus 1 and the
expired holder's release (reason ``expired``) is recorded first. Only the holder of
record may renew or release (409 ``NOT_HOLDER``), even after expiry as long as nobody
else has acquired it; anyone else acquiring a live lease gets 409 ``LEASE_HELD``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventcoord import errors
from eventcoord.codec import format_time
from eventcoord.commands import AcquireLease, ReleaseLease, RenewLease
from eventcoord.context import Context, Decision
from eventcoord.domain import streams
from eventcoord.domain.sessions import SessionState, require_live, require_not_ended
from eventcoord.events import NamedLeaseAcquired, NamedLeaseReleased, NamedLeaseRenewed

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
class NamedLeaseCommandState:
    """What acquire/renew/release_lease decide on: the caller (locked) and the lease (locked)."""

    session: SessionState | None
    lease: NamedLeaseState | None



def _lease_result(name: str, token: int, ttl_seconds: int, expires_us: int, renewed: bool) -> dict[str, Any]:
    return {
        "name": name,
        "fencing_token": token,
        "ttl_seconds": ttl_seconds,
        "expires_at": format_time(expires_us),
        "renewed": renewed,
    }


def _not_holder(name: str, me: SessionState, lease: NamedLeaseState | None) -> errors.DomainError:
    return errors.not_lease_holder(name, me.session_id, lease.session_id if lease else None)


def decide_acquire_lease(state: NamedLeaseCommandState, cmd: AcquireLease, ctx: Context) -> Decision:
    """Grant the name if it is free, expired or already ours (a renewal); else LEASE_HELD."""
    me = require_live(state.session, cmd.session_id, ctx)
    name, lease = cmd.name, state.lease
    d = Decision(session_id=me.session_id, actor_key=me.actor_key)
    if lease is not None and lease.session_id == me.session_id:
        return _renew(name, lease, me, cmd.ttl_seconds, ctx, d)
    if lease is not None and lease.session_id is not None and (lease.expires_us or 0) > ctx.now_us:
        raise errors.lease_held(name, lease.session_id, lease.actor_key, format_time(lease.expires_us or 0))
    if lease is not None and lease.session_id is not None:
        d.add(streams.named_lease(name), NamedLeaseReleased(name=name, session_id=lease.session_id, reason="expired"))
    ttl = cmd.ttl_seconds or DEFAULT_LEASE_TTL_SECONDS
    token = (lease.fencing_token if lease else 0) + 1
    expires = ctx.now_us + ttl * 1_000_000
    d.add(
        streams.named_lease(name),
        NamedLeaseAcquired(
            name=name, session_id=me.session_id, actor_key=me.actor_key, fencing_token=token, ttl_seconds=ttl, expires_at_us=expires
        ),
    )
    d.result = _lease_result(name, token, ttl, expires, renewed=False)
    return d


def _renew(name: str, lease: NamedLeaseState, me: SessionState, ttl_seconds: int | None, ctx: Context, d: Decision) -> Decision:
    ttl = ttl_seconds or lease.ttl_seconds or DEFAULT_LEASE_TTL_SECONDS
    expires = ctx.now_us + ttl * 1_000_000
    d.add(
        streams.named_lease(name),
        NamedLeaseRenewed(name=name, session_id=me.session_id, fencing_token=lease.fencing_token, ttl_seconds=ttl, expires_at_us=expires),
    )
    d.result = _lease_result(name, lease.fencing_token, ttl, expires, renewed=True)
    return d


def decide_renew_lease(state: NamedLeaseCommandState, cmd: RenewLease, ctx: Context) -> Decision:
    """Extend our lease from now (same token); NOT_HOLDER if it is not ours."""
    me = require_not_ended(state.session, cmd.session_id)
    name, lease = cmd.name, state.lease
    if lease is None or lease.session_id != me.session_id:
        raise _not_holder(name, me, lease)
    return _renew(name, lease, me, cmd.ttl_seconds, ctx, Decision(session_id=me.session_id, actor_key=me.actor_key))


def decide_release_lease(state: NamedLeaseCommandState, cmd: ReleaseLease, ctx: Context) -> Decision:
    """Give our lease up; the token stays as the last one granted."""
    me = require_not_ended(state.session, cmd.session_id)
    name, lease = cmd.name, state.lease
    if lease is None or lease.session_id != me.session_id:
        raise _not_holder(name, me, lease)
    d = Decision(session_id=me.session_id, actor_key=me.actor_key)
    d.add(streams.named_lease(name), NamedLeaseReleased(name=name, session_id=me.session_id, reason="released"))
    d.result = {
        "name": name,
        "fencing_token": lease.fencing_token,
        "ttl_seconds": lease.ttl_seconds,
        "expires_at": format_time(ctx.now_us),
        "released": True,
    }
    return d
