"""Liveness, judged in one place (docs/protocol.md#liveness).

A session is live when it has not ended and was last seen after the cutoff, ``now - TTL``,
both by the database's clock. Decisions judge it in Python (:func:`is_live`); state
loading and reads judge it in SQL (:func:`live_clause`); both start from :func:`cutoff`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement


def cutoff(now_us: int, ttl_seconds: int) -> int:
    """The last moment a live session may have been seen: ``now - TTL`` (exclusive)."""
    return now_us - ttl_seconds * 1_000_000


def is_live(last_seen_us: int | None, ended_us: int | None, cutoff_us: int) -> bool:
    """Not ended and seen after ``cutoff_us`` (no session at all is not live)."""
    return ended_us is None and last_seen_us is not None and last_seen_us > cutoff_us


def live_clause(last_seen_us: Any, ended_us: Any, cutoff_us: Any) -> ColumnElement[bool]:
    """:func:`is_live` in SQL, over a session's ``last_seen_us`` and ``ended_us`` columns."""
    clause: ColumnElement[bool] = ended_us.is_(None) & (last_seen_us > cutoff_us)
    return clause


def not_live_clause(last_seen_us: Any, ended_us: Any, cutoff_us: Any) -> ColumnElement[bool]:
    """The negation of :func:`live_clause` (ended, or not seen since the cutoff)."""
    clause: ColumnElement[bool] = ended_us.is_not(None) | (last_seen_us <= cutoff_us)
    return clause
