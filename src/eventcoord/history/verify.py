"""A log checked before it is trusted: its hash chain, and that its events can follow one another.

:class:`Verifier` takes events in position order and raises :class:`Refused`, naming the
first bad position, when the chain breaks (docs/protocol.md#the-hash-chain) or an event
cannot apply to what came before it: an unknown type or data that does not decode, a stream
version out of step (an event moved to another workspace), a session not registered in its
workspace, a lease released that was never granted, a fencing token out of order. It needs
no database (``eventcoord verify``); ``replay`` runs it before it writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from eventcoord.codec import EventMetadata, WireEvent, decode_event
from eventcoord.events import (
    EVENT_TYPES,
    AgentRegistered,
    Event,
    LeaseGranted,
    LeaseReleased,
    NamedLeaseAcquired,
    NamedLeaseReleased,
    NamedLeaseRenewed,
)
from eventcoord.history import chain

_METADATA = msgspec.json.Decoder(EventMetadata)


class Refused(ValueError):
    """The log cannot be trusted from ``position`` on: ``reason`` says why."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"position {position}: {reason}")
        self.position = position
        self.reason = reason


class Verifier:
    """Checks events one by one, in position order, keeping only what the checks need.

    A log that starts past position 1 (a live export after an archive, without the archive)
    cannot show what came before it: its first link is taken as given, and what its events
    name from before it (sessions, leases, stream versions) is believed.
    """

    def __init__(self, allow_gaps: bool = False, unchained: bool = False) -> None:
        self.allow_gaps = allow_gaps
        #: A log exported before events carried hashes: everything but the chain is checked.
        self.unchained = unchained
        self.last: int | None = None
        self.prev_hash = chain.GENESIS
        self.complete = True
        self.checked = 0
        self._previous: WireEvent | None = None
        self._versions: dict[tuple[str, str], int] = {}
        self._sessions: set[tuple[str, str]] = set()
        self._leases: dict[tuple[str, str], tuple[str, int]] = {}
        self._tokens: dict[tuple[str, str], int] = {}
        self._named: dict[tuple[str, str], dict[str, int]] = {}
        self._named_tokens: dict[tuple[str, str], int] = {}

    def check(self, ev: WireEvent) -> None:
        """Check the next event; :class:`Refused` names its position when it is bad."""
        p = ev.position
        if self.last is None:
            self.complete = p == 1
        elif p == self.last and self._previous is not None and ev == self._previous:
            return  # two overlapping files repeat the event they share
        elif p <= self.last:
            raise Refused(p, f"comes after position {self.last}: positions must rise")
        elif p != self.last + 1 and not self.allow_gaps:
            raise Refused(p, f"comes after position {self.last}: a gap (a filtered export? use --allow-gaps)")
        self._check_link(ev)
        meta, event = self._decode(ev)
        self._apply(p, ev, meta.workspace, event)
        self.last = p
        self._previous = ev
        self.checked += 1

    def _check_link(self, ev: WireEvent) -> None:
        if self.unchained:
            return
        if ev.hash is None:
            raise Refused(ev.position, "has no hash: the chain cannot be checked")
        p = ev.position
        if p != (1 if self.last is None else self.last + 1):
            # The first event of a partial log, or one after a gap: its link is taken as given.
            self.prev_hash = ev.hash
            return
        try:
            expected = chain.link(self.prev_hash, chain.canonical(chain.wire_object(ev)))
        except ValueError as e:
            raise Refused(p, f"data or metadata is not JSON ({e})") from None
        if expected != ev.hash:
            raise Refused(p, "the hash chain breaks here (the event or the hash before it was changed)")
        self.prev_hash = expected

    @staticmethod
    def _decode(ev: WireEvent) -> tuple[EventMetadata, Event]:
        if ev.type not in EVENT_TYPES:
            raise Refused(ev.position, f"unknown event type {ev.type!r}")
        try:
            meta = _METADATA.decode(bytes(ev.metadata))
            event = decode_event(ev.type, bytes(ev.data))
        except Exception as e:  # whatever the data is, a refusal naming it, never a traceback
            raise Refused(ev.position, f"{ev.type} does not decode: {e}") from None
        return meta, event

    def _apply(self, p: int, ev: WireEvent, ws: str, e: Event) -> None:
        if not self.allow_gaps:
            key = (ws, ev.stream)
            before = self._versions.get(key)
            if before is None and not self.complete:
                before = ev.version - 1
            if ev.version != (before or 0) + 1:
                raise Refused(
                    p,
                    f"version {ev.version} of stream {ev.stream!r} in workspace {ws!r} follows version {before or 0}"
                    " (an event moved, removed or inserted)",
                )
            self._versions[key] = ev.version
        if isinstance(e, AgentRegistered):
            if (ws, e.session_id) in self._sessions:
                raise Refused(p, f"session {e.session_id!r} is registered twice in workspace {ws!r}")
            self._sessions.add((ws, e.session_id))
            return
        sid = getattr(e, "session_id", None)
        if isinstance(sid, str) and self.complete and (ws, sid) not in self._sessions:
            raise Refused(p, f"{ev.type} names session {sid!r}, never registered in workspace {ws!r}")
        if isinstance(e, LeaseGranted | LeaseReleased):
            self._issue_lease(p, ws, e)
        elif isinstance(e, NamedLeaseAcquired | NamedLeaseRenewed | NamedLeaseReleased):
            self._named_lease(p, ws, e)

    def _issue_lease(self, p: int, ws: str, e: LeaseGranted | LeaseReleased) -> None:
        key = (ws, e.issue)
        if isinstance(e, LeaseGranted):
            last = self._tokens.get(key)
            if last is None and self.complete:
                last = 0
            # Each grant of an issue takes the next token (docs/protocol.md#claim_issue-in-order).
            if last is not None and e.fencing_token != last + 1:
                raise Refused(p, f"grants issue {e.issue!r} fencing token {e.fencing_token}; the next is {last + 1}")
            self._tokens[key] = e.fencing_token
            self._leases[key] = (e.session_id, e.fencing_token)
            return
        held = self._leases.pop(key, None)
        if held is None:
            if self.complete:
                raise Refused(p, f"releases a lease of issue {e.issue!r} that was never granted")
            return
        holder, token = held
        if holder != e.session_id:
            raise Refused(p, f"releases the lease of issue {e.issue!r} for {e.session_id!r}; {holder!r} holds it")
        if e.fencing_token and e.fencing_token != token:
            raise Refused(p, f"releases issue {e.issue!r} with fencing token {e.fencing_token}; the lease has {token}")

    def _named_lease(self, p: int, ws: str, e: NamedLeaseAcquired | NamedLeaseRenewed | NamedLeaseReleased) -> None:
        key = (ws, e.name)
        holders = self._named.setdefault(key, {})
        if isinstance(e, NamedLeaseAcquired):
            last = self._named_tokens.get(key)
            if last is None and self.complete:
                last = 0
            # A lease of one holder takes the next token; slots of a larger capacity may reuse one.
            if isinstance(e.capacity, msgspec.UnsetType) and last is not None and e.fencing_token != last + 1:
                raise Refused(
                    p, f"acquires lease {e.name!r} with fencing token {e.fencing_token}; the next is {last + 1}"
                )
            self._named_tokens[key] = max(e.fencing_token, last or 0)
            holders[e.session_id] = e.fencing_token
            return
        token = holders.get(e.session_id)
        if token is None:
            if self.complete:
                raise Refused(p, f"{type(e).__name__} of lease {e.name!r} by {e.session_id!r}, who never acquired it")
            return
        if isinstance(e, NamedLeaseRenewed):
            if e.fencing_token != token:
                raise Refused(p, f"renews lease {e.name!r} with fencing token {e.fencing_token}; it was {token}")
        else:
            del holders[e.session_id]


def verify(items: Iterable[WireEvent], allow_gaps: bool = False, unchained: bool = False) -> Verifier:
    """Check every event of ``items`` in order; :class:`Refused` at the first bad one."""
    v = Verifier(allow_gaps, unchained)
    for ev in items:
        v.check(ev)
    return v


def summary(v: Verifier) -> dict[str, Any]:
    """What a verified log was: its events, its last position and hash."""
    return {"events": v.checked, "last_position": v.last, "last_hash": v.prev_hash}
