"""A PreToolUse costs PostgreSQL one statement before its claim, not a transaction of five.

What the hook needs before it claims — the database's clock and TTL, the binding with its
session and latest lease, and the session's own exclusive claims over the files — is one
statement, sent outside a transaction (``EventStore.query_one``). Before: ``BEGIN``, the
clock, the binding, the claims and ``ROLLBACK``, five round trips on every PreToolUse.
Counted on the real store: every statement asyncpg sends, including those SQLAlchemy
prepares and fetches itself.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from eventcoord.codec import decode_command
from eventcoord.context import Caller
from eventcoord.harness.hooks import Hooks
from eventcoord.harness.payloads import decode_payload
from eventcoord.service import Service

CWD = "/home/dev/proj"
ADMIN = Caller("default", "admin", operator=True)


@contextlib.contextmanager
def sent() -> Iterator[list[str]]:
    """Every statement asyncpg sends meanwhile: its own calls and the prepared statements
    SQLAlchemy fetches through."""
    out: list[str] = []
    patched: list[tuple[Any, str, Any]] = []
    for owner, names in (
        (asyncpg.connection.Connection, ("execute", "executemany", "fetch", "fetchrow", "fetchval")),
        (asyncpg.prepared_stmt.PreparedStatement, ("fetch", "fetchrow", "fetchval", "executemany")),
    ):
        for name in names:
            original = getattr(owner, name)
            prepared = owner is asyncpg.prepared_stmt.PreparedStatement

            def counting(original: Any = original, prepared: bool = prepared) -> Any:
                async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                    out.append(self.get_query() if prepared else args[0])
                    return await original(self, *args, **kwargs)

                return call

            patched.append((owner, name, original))
            setattr(owner, name, counting())
    try:
        yield out
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)


def write(path: str) -> dict[str, Any]:
    return {"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": {"file_path": f"{CWD}/{path}"}}


@pytest.mark.postgres
async def test_a_pre_tool_use_reads_in_one_statement_then_claims(store: Any) -> None:
    service = Service(store)
    hooks = Hooks(service, store)

    async def hook(payload: dict[str, Any]) -> Any:
        body = {"session_id": "eb58c0de-0001", "cwd": CWD, **payload}
        return await hooks.answer(ADMIN, "claude", decode_payload(json.dumps(body).encode()))

    async def command(body: dict[str, Any]) -> Any:
        return (await service.execute(ADMIN, decode_command(json.dumps(body).encode()))).result

    await hook({"hook_event_name": "SessionStart"})
    for warm in ("held.py", "warm.py"):  # the first of each statement prepares it
        await hook(write(warm))
    other = (await command({"type": "register_agent", "actor": "other"}))["session_id"]
    await command({"type": "claim_files", "session_id": other, "issue": "O-1", "paths": ["o/warm.py"]})

    with sent() as held:
        assert (await hook(write("held.py"))).hook_specific_output is None
    assert len(held) == 1, held  # the file is its own: one read, nothing written
    assert not any(s.strip().upper().startswith(("BEGIN", "ROLLBACK")) for s in held), held

    with sent() as claimed:
        await command({"type": "claim_files", "session_id": other, "issue": "O-1", "paths": ["o/new.py"]})
    with sent() as new:
        assert (await hook(write("new.py"))).hook_specific_output is None
    assert len(new) == len(claimed) + 1, (new, claimed)  # the claim's batch and the one read
