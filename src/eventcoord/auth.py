"""Bearer tokens bound to one workspace and a role; stored as SHA-256 digests.

Tokens are 256 random bits, so a fast hash is the right one (no password stretching on
the hot path). Each has a public ``token_id`` (derived from its digest) that
``revoke_token`` names. Positive lookups are cached for at most :data:`CACHE_SECONDS`
(keyed by the token itself, not by how the header was spelled), so a revocation
committed on any replica is honoured by every replica within a second (docs/protocol.md#roles).
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
    RevokeToken,
)
from eventcoord.context import Caller, Role
from eventcoord.store.base import EventStore
from eventcoord.store.schema import tokens, workspaces

ROLES: tuple[Role, ...] = ("admin", "human", "agent", "reader")
#: How long a token lookup is trusted: a revoked token stops working on every replica
#: within this (well under the second the protocol allows).
CACHE_SECONDS = 0.5


def hash_token(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_id_of(token_hash: str) -> str:
    """The public id of the token stored as ``token_hash`` (reveals nothing about it)."""
    return "tok_" + hashlib.sha256(b"eventcoord-token-id:" + token_hash.encode()).hexdigest()[:24]


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


def store_token(conn: Connection, token: str, workspace: str, role: Role, now_us: int) -> str:
    """Record a token (hashed) for a workspace, creating the workspace; returns its ``token_id``."""
    ensure_workspace(conn, workspace, now_us)
    digest = hash_token(token)
    token_id = token_id_of(digest)
    conn.execute(
        tokens.insert().values(token_hash=digest, workspace=workspace, role=role, created_us=now_us, token_id=token_id)
    )
    return token_id


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization`` header, or None when it carries no bearer token.

    The scheme is case-insensitive (RFC 9110 §11.1) and spaces around scheme and token are
    not part of either. The rate limits key on this same reading, so a token cannot be
    respelled into a new one (docs/protocol.md#under-attack).
    """
    parts = header.split(None, 1) if header else []
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1].strip() or None


class Authenticator:
    """Turns an ``Authorization`` header into a :class:`Caller`."""

    def __init__(self, store: EventStore, bootstrap_token: str | None) -> None:
        self._store = store
        self._bootstrap = hash_token(bootstrap_token) if bootstrap_token else None
        self._operator = Caller("default", "admin", operator=True, token_id=token_id_of(self._bootstrap or ""))
        self._cache: dict[str, tuple[Caller, float]] = {}

    async def authenticate(self, header: str | None) -> Caller:
        """The caller of a request; 401 UNAUTHENTICATED for a missing, unknown or revoked token."""
        token = bearer_token(header)
        if token is None:
            raise errors.unauthenticated("missing bearer token")
        now = time.monotonic()
        # Keyed by the token, not the header's spelling: a hit costs no hashing at all.
        hit = self._cache.get(token)
        if hit is not None and hit[1] > now:
            return hit[0]
        digest = hash_token(token)
        if digest == self._bootstrap:  # kept like any other: an operator's tools hash it once too
            self._cache[token] = (self._operator, now + CACHE_SECONDS)
            return self._operator
        row = await self._store.query(
            lambda c: c.execute(
                select(tokens.c.workspace, tokens.c.role, tokens.c.token_id).where(
                    (tokens.c.token_hash == digest) & tokens.c.revoked_us.is_(None)
                )
            ).first()
        )
        if row is None:
            self._cache.pop(token, None)
            raise errors.unauthenticated("unknown token")
        caller = Caller(row.workspace, cast(Role, row.role), token_id=row.token_id or token_id_of(digest))
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[token] = (caller, now + CACHE_SECONDS)
        return caller


def authorize(caller: Caller, cmd: AnyCommand) -> None:
    """Role rules of docs/protocol.md#roles; 403 FORBIDDEN when the role may not send this command."""
    role = caller.role
    if role == "admin":
        return
    if role == "reader":
        raise errors.forbidden("a reader token may not send commands")
    if isinstance(cmd, IssueToken | RevokeToken | ConfigureProject):
        raise errors.forbidden(f"only an admin token may send {type(cmd).__struct_config__.tag}")
    if role == "agent":
        if isinstance(cmd, ClaimIssue) and cmd.force:
            raise errors.forbidden("only a human or admin may force a claim")
        if isinstance(cmd, RegisterAgent) and cmd.kind == "human":
            raise errors.forbidden("only a human or admin token may register a human session")
        if isinstance(cmd, ClaimFiles | ReleaseFiles) and cmd.session_id is None:
            raise errors.forbidden("only a human or admin may hold file claims without a session")


def list_tokens(conn: Connection, workspace: str | None = None) -> list[dict[str, object]]:
    """Every stored token (never its secret): ``token_id``, workspace, role, created, revoked."""
    stmt = select(
        tokens.c.token_id,
        tokens.c.token_hash,
        tokens.c.workspace,
        tokens.c.role,
        tokens.c.created_us,
        tokens.c.revoked_us,
    )
    if workspace is not None:
        stmt = stmt.where(tokens.c.workspace == workspace)
    rows = conn.execute(stmt.order_by(tokens.c.workspace, tokens.c.created_us, tokens.c.token_hash)).all()
    return [
        {
            "token_id": r.token_id or token_id_of(r.token_hash),
            "workspace": r.workspace,
            "role": r.role,
            "created_us": r.created_us,
            "revoked_us": r.revoked_us,
        }
        for r in rows
    ]


def revoke_stored_token(conn: Connection, token_id: str, now_us: int) -> bool:
    """Mark ``token_id`` revoked (the operator's path, beside ``revoke_token``); False if unknown."""
    found = conn.execute(select(tokens.c.revoked_us).where(tokens.c.token_id == token_id)).first()
    if found is None:
        return False
    if found.revoked_us is None:
        conn.execute(tokens.update().where(tokens.c.token_id == token_id).values(revoked_us=now_us))
    return True


def authorize_session(caller: Caller, session_id: str, owner_token_id: str | None) -> None:
    """A session belongs to the token that registered it; another token of the
    workspace naming it is 403 FORBIDDEN, unless it is an admin's. A session registered
    before sessions were bound (no owner) is anyone's of the workspace."""
    if owner_token_id is None or caller.role == "admin" or caller.token_id == owner_token_id:
        return
    raise errors.session_of_another_token(session_id)
