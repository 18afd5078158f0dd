"""Round trips per command on PostgreSQL: the statements each hot command sends, counted.

On PostgreSQL a command's cost is mostly its round trips to the database (on this 2-core
VM a round trip costs ~70-100 µs of the server's CPU, most of it in the kernel: see
docs/performance.md), so this counts them: it wraps asyncpg's ``fetch``, ``fetchrow``,
``fetchval``, ``execute`` and ``executemany``, runs each command kind ``--count`` times on a
fresh database through ``Service.execute`` (one at a time: every command is a batch of
its own, so BEGIN, the clock, the end statement and COMMIT count in full), and prints the
statements per command and, with ``--show``, each statement's text.

    .venv/bin/python bench/round_trips.py --db postgresql+asyncpg://postgres@127.0.0.1:5432
    .venv/bin/python bench/round_trips.py --db … --kinds claim_issue --show
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import command_path as cp

KINDS = ("heartbeat_agent", "claim_issue", "release_issue", "claim_files", "release_files", "queue")
#: Hook route kinds (``POST /v1/hooks/claude`` without HTTP): a PreToolUse ``Write`` of a file
#: the harness session holds, of a new file, of a file another session holds.
HOOK_KINDS = ("pre_held", "pre_new", "pre_denied")
CWD = "/home/dev/proj"
COUNTS: collections.Counter[tuple[str, str]] = collections.Counter()


def _count_calls() -> None:
    """Count every statement asyncpg sends (method, SQL text)."""
    for name in ("fetch", "fetchrow", "fetchval", "execute", "executemany"):
        original = getattr(asyncpg.connection.Connection, name)

        def counted(original: Any = original, name: str = name) -> Callable[..., Awaitable[Any]]:
            async def call(self: Any, sql: str, *args: Any, **kw: Any) -> Any:
                COUNTS[(name, " ".join(sql.split()))] += 1
                return await original(self, sql, *args, **kw)

            return call

        setattr(asyncpg.connection.Connection, name, counted())
    # What SQLAlchemy sends itself (its asyncpg adapter prepares, then fetches the statement).
    for name in ("fetch", "fetchrow", "fetchval", "executemany"):
        original = getattr(asyncpg.prepared_stmt.PreparedStatement, name)

        def counted_prepared(original: Any = original, name: str = name) -> Callable[..., Awaitable[Any]]:
            async def call(self: Any, *args: Any, **kw: Any) -> Any:
                COUNTS[(f"prepared.{name}", " ".join(self.get_query().split()))] += 1
                return await original(self, *args, **kw)

            return call

        setattr(asyncpg.prepared_stmt.PreparedStatement, name, counted_prepared())


def claim(tier: str, sid: str, tag: str, k: int) -> dict[str, Any]:
    """The ``k``-th claim of a tier (``issue``: two issues per project, as bench/commands.py claims them)."""
    if tier == "issue":
        return {"type": "claim_issue", "session_id": sid, "project": f"{tag}-P{k // 2}", "issue": f"{tag}-{k}"}
    return {"type": "claim_files", "session_id": sid, "issue": f"{tag}-{k}", "paths": [f"{tag}/{k}.py"]}


async def measure(
    url: str, kinds: list[str], n: int, at_once: int = 1
) -> dict[str, tuple[int, collections.Counter[tuple[str, str]]]]:
    from eventcoord.codec import decode_command
    from eventcoord.context import Caller
    from eventcoord.service import Service
    from eventcoord.store import open_store

    operator = Caller("default", "admin", operator=True)
    store = open_store(url)
    await store.start()
    await store.migrate()
    service = Service(store)

    async def send(body: dict[str, Any]) -> Any:
        return (await service.execute(operator, decode_command(json.dumps(body).encode()))).result

    sid = (await send({"type": "register_agent", "actor": "a"}))["session_id"]
    # Sent at once, the claims and releases come from ``at_once`` agents (one each), as
    # bench/commands.py sends them (a session per connection).
    agents = [sid]
    for i in range(1, at_once):
        agents.append((await send({"type": "register_agent", "actor": f"a{i}"}))["session_id"])
    # per kind: the commands measured, and the statements they sent
    out: dict[str, tuple[int, collections.Counter[tuple[str, str]]]] = {}
    try:
        for kind in kinds:
            measured: list[dict[str, Any]] = []
            if kind == "heartbeat_agent":
                measured = [{"type": "heartbeat_agent", "session_id": sid}] * n
            elif kind != "queue":  # a claim, or a release of as many claimed first
                claims = [claim(kind.split("_", 1)[1], agents[k % at_once], kind, k) for k in range(n)]
                if kind.startswith("claim"):
                    measured = claims
                else:
                    for body in claims:
                        await send(body)
                    measured = [
                        {"type": kind, "session_id": agents[k % at_once], "issue": f"{kind}-{k}"} for k in range(n)
                    ]
            if kind in HOOK_KINDS:
                out[kind] = await _hooks(service, store, operator, send, kind, n)
                continue
            if kind == "queue":  # claim_next_work + finish_work, counted as two commands
                # each agent pulls from its own project, as bench/commands.py's connections do;
                # every agent pulls as often, so each project holds as many items as its puller takes
                rounds = -(-n // at_once)
                for k in range(rounds * at_once):
                    await send({"type": "enqueue_work", "project": f"Q{k % at_once}"})

                async def pull_and_finish(agent: int) -> None:
                    body = {"type": "claim_next_work", "session_id": agents[agent], "project": f"Q{agent}"}
                    item = (await send(body))["item"]
                    await send(
                        {
                            "type": "finish_work",
                            "session_id": agents[agent],
                            "item_id": item["item_id"],
                            "outcome": "cancelled",
                        }
                    )

                COUNTS.clear()
                for _ in range(rounds):
                    await asyncio.gather(*(pull_and_finish(a) for a in range(at_once)))
                out[kind] = (2 * rounds * at_once, collections.Counter(COUNTS))
                continue
            COUNTS.clear()
            for at in range(0, len(measured), at_once):  # ``at_once`` together: one batch (after the first)
                await asyncio.gather(*(send(body) for body in measured[at : at + at_once]))
            out[kind] = (n, collections.Counter(COUNTS))
    finally:
        await store.close()
    return out


async def _hooks(
    service: Any, store: Any, caller: Any, send: Callable[[dict[str, Any]], Awaitable[Any]], kind: str, n: int
) -> tuple[int, collections.Counter[tuple[str, str]]]:
    """``n`` PreToolUse hooks of ``kind``, one at a time, each counted in full."""
    from eventcoord.harness.hooks import Hooks
    from eventcoord.harness.payloads import decode_payload

    hooks = Hooks(service, store)
    harness_session = f"bench-{kind}"

    async def hook(payload: dict[str, Any]) -> Any:
        body = {"session_id": harness_session, "cwd": CWD, **payload}
        return await hooks.answer(caller, "claude", decode_payload(json.dumps(body).encode()))

    def write(path: str) -> dict[str, Any]:
        return {"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": {"file_path": f"{CWD}/{path}"}}

    await hook({"hook_event_name": "SessionStart", "source": "startup"})
    if kind == "pre_held":
        for k in range(n):
            await hook(write(f"held/{k}.py"))
        paths = [f"held/{k}.py" for k in range(n)]
    elif kind == "pre_denied":
        other = (await send({"type": "register_agent", "actor": "alice"}))["session_id"]
        await send({"type": "claim_files", "session_id": other, "issue": "A-1", "paths": ["theirs.py"]})
        paths = ["theirs.py"] * n
    else:
        paths = [f"new/{k}.py" for k in range(n)]
    COUNTS.clear()
    for path in paths:
        await hook(write(path))
    return n, collections.Counter(COUNTS)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--db", required=True, help="postgresql+asyncpg://user@host:port (a fresh database is made)")
    p.add_argument("--kinds", nargs="+", choices=KINDS + HOOK_KINDS, default=list(KINDS))
    p.add_argument("--count", type=int, default=20, help="commands of each kind (default 20)")
    p.add_argument(
        "--at-once",
        type=int,
        default=1,
        help="send the claims and releases this many at a time, concurrently (a batch each; default 1)",
    )
    p.add_argument("--width", type=int, default=150, help="characters of each statement --show prints")
    p.add_argument("--show", action="store_true", help="print each statement and how often a command sends it")
    args = p.parse_args()
    _count_calls()
    with cp.fresh_postgres(args.db) as url:
        results = asyncio.run(measure(url, args.kinds, args.count, args.at_once))
    for kind, (n, counts) in results.items():
        label = "claim_next_work + finish_work (per command)" if kind == "queue" else kind
        batch = "a batch of one" if args.at_once == 1 else f"{args.at_once} sent at once"
        print(f"{label:<45} {sum(counts.values()) / n:5.1f} statements per command ({batch})")
        if args.show:
            for (method, sql), c in counts.most_common():
                print(f"    {c / n:5.2f}  {method:<11} {sql[: args.width]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
