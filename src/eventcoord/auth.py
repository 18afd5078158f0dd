"""Bearer tokens bound to one workspace and a role; stored as SHA-256 digests.

Tokens are 256 random bits, so a fast hash is the right one (no password stretching on
the hot path). Positive lookups are cached briefly: tokens are never rewritten in place.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import cast

from sqlalchemy import Connection, select
from sqlalchemy.exc import IntegrityError

from eventcoord import errors
from eventcoord.commands import (
    AnyCommand,
    ClaimFiles,
    ClaimIssue,
    ConfigureProject,
    IssueToken,
    RegisterAgent,
    ReleaseFiles,
)
from eventcoord.context import Caller, Role
from eventcoord.store.base import EventStore
from eventcoord.store.schema import tokens, workspaces

ROLES: tuple[Role, ...] = ("admin", "human", "agent", "reader")
_CACHE_SECONDS = 30.0


def hash_token(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random bearer token."""
    return "ec_" + secrets.token_urlsafe(32)


def ensure_workspace(conn: Connection, name: str, now_us: int) -> None:
    """Create the workspace row if missing (it is the lock row of workspace-wide guards)."""
    if conn.execute(select(workspaces.c.name).where(workspaces.c.name == name)).first() is None:
        try:
            with conn.begin_nested():
                conn.execute(workspaces.insert().values(name=name, created_us=now_us))
        except IntegrityError:
            pass  # created concurrently: fine


def store_token(conn: Connection, token: str, workspace: str, role: Role, now_us: int) -> None:
    """Record a token (hashed) for a workspace, creating the workspace."""
    ensure_workspace(conn, workspace, now_us)
    conn.execute(tokens.insert().values(token_hash=hash_token(token), workspace=workspace, role=role, created_us=now_us))


class Authenticator:
    """Turns an ``Authorization`` header into a :class:`Caller`."""

    def __init__(self, store: EventStore, bootstrap_token: str | None) -> None:
        self._store = store
        self._bootstrap = hash_token(bootstrap_token) if bootstrap_token else None
        self._cache: dict[str, tuple[Caller, float]] = {}

    async def authenticate(self, header: str | None) -> Caller:
        """The caller of a request; 401 UNAUTHENTICATED for a missing or unknown token."""
        # The auth scheme is case-insensitive (RFC 9110 §11.1).
        if not header or header[:7].lower() != "bearer ":
            raise errors.unauthenticated("missing bearer token")
        now = time.monotonic()
        # Keyed by the header itself: a hit costs no hashing at all.
        hit = self._cache.get(header)
        if hit is not None and hit[1] > now:
            return hit[0]
        digest = hash_token(header[7:].strip())
        if digest == self._bootstrap:
            caller = Caller("default", "admin", operator=True)
            self._cache[header] = (caller, now + _CACHE_SECONDS)
            return caller
        row = await self._store.query(
            lambda c: c.execute(select(tokens.c.workspace, tokens.c.role).where(tokens.c.token_hash == digest)).first()
        )
        if row is None:
            raise errors.unauthenticated("unknown token")
        caller = Caller(row.workspace, cast(Role, row.role))
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[header] = (caller, now + _CACHE_SECONDS)
        return caller


def authorize(caller: Caller, cmd: AnyCommand) -> None:
    """Role rules of SPEC §5; 403 FORBIDDEN when the role may not send this command."""
    role = caller.role
    if role == "admin":
        return
    if role == "reader":
        raise errors.forbidden("a reader token may not send commands")
    if isinstance(cmd, IssueToken | ConfigureProject):
        raise errors.forbidden(f"only an admin token may send {type(cmd).__struct_config__.tag}")
    if role == "agent":
        if isinstance(cmd, ClaimIssue) and cmd.force:
            raise errors.forbidden("only a human or admin may force a claim")
        if isinstance(cmd, RegisterAgent) and cmd.kind == "human":
            raise errors.forbidden("only a human or admin token may register a human session")
        if isinstance(cmd, ClaimFiles | ReleaseFiles) and cmd.session_id is None:
            raise errors.forbidden("only a human or admin may hold file claims without a session")
