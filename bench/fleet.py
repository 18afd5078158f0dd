"""A fleet of agents against one ``eventcoord serve``: how many agents does one server carry?

Each simulated agent lives like a coding agent does:

* registers, then heartbeats every ``--heartbeat`` seconds (30);
* every ``--claim-every`` seconds (60) takes a piece of work: ``claim_issue`` (its team's
  project), ``claim_files`` (two files of its own area), ``post_message`` on the issue's
  channel; works for half the interval; then ``release_files`` and ``release_issue``;
* as often, pulls queue work: ``claim_next_work`` and ``finish_work`` (a producer
  ``enqueue_work``s at the same rate, so the queue neither dries up nor grows);

so about 10 commands per agent per minute, ~half the fleet holding a lease and two live
file claims at any moment. Every command's latency is measured from the moment it was due
(open loop: a late answer delays nothing but itself, and a client-side queue counts), so a
p99 is what an agent would see.

Time compression: a step with ``--agents`` simulated agents at compression ``k`` divides
both intervals by ``k``: the server sees the load of ``k * agents`` agents living at the
real pace (the equivalent fleet, reported). The sweep raises the equivalent fleet step by
step until p99 exceeds ``--p99-ms`` (25) or the server falls behind the offered rate;
the answer is the largest step that passed.

The client is a minimal keep-alive HTTP/1.1 client on asyncio (httpx would cost more CPU
than the server on a 2-core machine); it runs in this process, the server in its own, and
the server's CPU per command is read from /proc.

    .venv/bin/python bench/fleet.py                                   # SQLite, sweep
    .venv/bin/python bench/fleet.py --db postgresql+asyncpg://postgres@127.0.0.1:5432
    .venv/bin/python bench/fleet.py --fleet 6000 --duration 30        # one step
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from command_path import (
    TOKEN,
    Server,
    batching,
    free_port,
    fresh_postgres,
    start_eventcoord,
    system_busy_seconds,
)

#: Commands per agent per minute at the real pace (heartbeats 2, issue cycle 5, queue 2 + the producer's enqueue 1).
COMMANDS_PER_AGENT_MINUTE = 10
TEAM = 8  # agents per project (the project's WIP limit, so a claim is not refused by the cap)


class Conn:
    """One keep-alive HTTP/1.1 connection that POSTs commands."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def post(self, body: bytes) -> tuple[int, bytes]:
        self.writer.write(
            b"POST /v1/commands HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer "
            + TOKEN.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        status = int((await self.reader.readline()).split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


class Client:
    """A pool of connections; records each command's latency from when it was due."""

    def __init__(self, port: int, size: int) -> None:
        self.port, self.size = port, size
        self.pool: asyncio.Queue[Conn] = asyncio.Queue()
        self.lat: dict[str, list[float]] = {}
        self.errors: dict[str, int] = {}
        self.recording = False

    async def start(self) -> None:
        for _ in range(self.size):
            self.pool.put_nowait(await Conn.open(self.port))

    async def send(self, body: dict[str, Any], due: float | None = None) -> dict[str, Any] | None:
        """The command's answer (None if refused); timed from ``due`` (default: now)."""
        due = time.perf_counter() if due is None else due
        conn = await self.pool.get()
        try:
            status, raw = await conn.post(json.dumps(body).encode())
        finally:
            self.pool.put_nowait(conn)
        kind = body["type"]
        if self.recording:
            self.lat.setdefault(kind, []).append((time.perf_counter() - due) * 1000)
        answer: dict[str, Any] = json.loads(raw)
        if status != 200:
            if self.recording:
                code = answer.get("error", {}).get("code", status)
                self.errors[f"{kind} {code}"] = self.errors.get(f"{kind} {code}", 0) + 1
            return None
        return answer

    def close(self) -> None:
        while not self.pool.empty():
            self.pool.get_nowait().close()


async def _at(t: float) -> None:
    delay = t - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


async def agent(c: Client, i: int, step: str, heartbeat: float, cycle: float, start: float, end: float) -> None:
    """One agent: heartbeats, an issue cycle and a queue pull every ``cycle`` seconds."""
    answer = await c.send({"type": "register_agent", "actor": f"{step}-a{i}", "host": f"h{i % 16}"})
    if answer is None:
        return
    sid = answer["result"]["session_id"]
    project = f"{step}-team{i // TEAM}"
    rng = random.Random(i)

    async def heartbeats() -> None:
        due = start + rng.uniform(0, heartbeat)
        while due < end:
            await _at(due)
            await c.send({"type": "heartbeat_agent", "session_id": sid}, due)
            due += heartbeat

    async def work() -> None:
        due, k = start + rng.uniform(0, cycle), 0
        while due < end:
            await _at(due)
            issue = f"{project}-{i}-{k}"
            paths = [f"src/{step}/a{i}/m{k % 5}.py", f"tests/{step}/a{i}/test_m{k % 5}.py"]
            claimed = await c.send({"type": "claim_issue", "session_id": sid, "project": project, "issue": issue}, due)
            if claimed is not None:
                await c.send({"type": "claim_files", "session_id": sid, "issue": issue, "paths": paths})
                await c.send({"type": "post_message", "session_id": sid, "channel": f"issue:{issue}", "body": "on it"})
                await _at(due + cycle / 2)
                await c.send({"type": "release_files", "session_id": sid, "issue": issue}, due + cycle / 2)
                await c.send({"type": "release_issue", "session_id": sid, "issue": issue})
            due, k = due + cycle, k + 1

    async def pulls() -> None:
        due = start + rng.uniform(0, cycle)
        while due < end:
            await _at(due)
            got = await c.send({"type": "claim_next_work", "session_id": sid, "project": f"{step}-queue"}, due)
            item = (got or {}).get("result", {}).get("item")
            if item:
                await c.send(
                    {"type": "finish_work", "session_id": sid, "item_id": item["item_id"], "outcome": "cancelled"}
                )
            due += cycle

    await asyncio.gather(heartbeats(), work(), pulls())


async def producer(c: Client, step: str, rate: float, start: float, end: float) -> None:
    """Enqueues work items at ``rate`` per second (one per agent per cycle), each when it is
    due: the producers are many (CI jobs, people), so one enqueue that runs late must not
    hold back the next. (Sent one after another, a late one queued every later one behind
    it, and their latencies, measured from when each was due, added up to seconds.)"""
    due, sent = start, []
    while due < end:
        await _at(due)
        body = {"type": "enqueue_work", "project": f"{step}-queue", "payload": {"task": "lint"}}
        sent.append(asyncio.create_task(c.send(body, due)))
        due += 1.0 / rate
    await asyncio.gather(*sent)


def pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))] if s else float("nan")


async def run_step(
    server: Server, *, step: str, agents: int, compress: float, args: argparse.Namespace
) -> dict[str, Any]:
    """One step: ``agents`` simulated agents at ``compress``; returns its figures."""
    heartbeat, cycle = args.heartbeat / compress, args.claim_every / compress
    c = Client(server.port, args.connections)
    await c.start()
    try:
        for t in range(agents // TEAM + 1):
            await c.send({"type": "configure_project", "project": f"{step}-team{t}", "wip_limit": TEAM})
        begin = time.perf_counter() + 1.0 + agents * 0.002  # registrations first
        warm, end = begin + args.warmup, begin + args.warmup + args.duration
        tasks = [asyncio.create_task(agent(c, i, step, heartbeat, cycle, begin, end)) for i in range(agents)]
        tasks.append(asyncio.create_task(producer(c, step, agents / cycle, begin, end)))
        await _at(warm)
        c.recording = True
        cpu0, busy0, t0 = server.cpu_seconds(), system_busy_seconds(), time.perf_counter()
        await _at(end)
        c.recording = False
        cpu1, busy1, wall = server.cpu_seconds(), system_busy_seconds(), time.perf_counter() - t0
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    finally:
        c.close()
    all_lat = [x for v in c.lat.values() for x in v]
    n = len(all_lat)
    offered = agents * COMMANDS_PER_AGENT_MINUTE / 60 * compress
    out = {
        "fleet": round(agents * compress),
        "simulated_agents": agents,
        "compress": compress,
        "heartbeat_s": round(heartbeat, 3),
        "claim_every_s": round(cycle, 3),
        "offered_per_s": round(offered, 1),
        "commands_per_s": round(n / wall, 1),
        "p50_ms": round(pct(all_lat, 0.5), 2),
        "p99_ms": round(pct(all_lat, 0.99), 2),
        "server_cpu_us_per_command": round((cpu1 - cpu0) / max(n, 1) * 1e6),
        "server_cores": round((cpu1 - cpu0) / wall, 2),
        "rest_of_machine_cores": round((busy1 - busy0) / wall - (cpu1 - cpu0) / wall, 2),
        "per_command": {
            k: {"n": len(v), "p50_ms": round(statistics.median(v), 2), "p99_ms": round(pct(v, 0.99), 2)}
            for k, v in sorted(c.lat.items())
        },
        "errors": c.errors,
        "writer": batching(server.base),
    }
    return out


def fmt_step(r: dict[str, Any]) -> str:
    return (
        f"  fleet {r['fleet']:>6,} ({r['simulated_agents']} agents x{r['compress']:g}: heartbeat {r['heartbeat_s']} "
        f"s, claim every {r['claim_every_s']} s)"
        f"  {r['commands_per_s']:>7.1f}/s of {r['offered_per_s']:.1f} offered  p50 {r['p50_ms']:.2f} ms  p99 "
        f"{r['p99_ms']:.2f} ms"
        f"  server {r['server_cpu_us_per_command']} us CPU/command, {r['server_cores']} cores (rest of machine "
        f"{r['rest_of_machine_cores']})\n      writer (since the server started): {json.dumps(r['writer'])}"
    )


def passes(r: dict[str, Any], p99_ms: float) -> bool:
    return bool(r["p99_ms"] <= p99_ms and r["commands_per_s"] >= 0.95 * r["offered_per_s"] and not r["errors"])


@contextlib.contextmanager
def serving(db: str | None) -> Iterator[Server]:
    with (
        tempfile.TemporaryDirectory(prefix="eventcoord-fleet-") as tmp,
        fresh_postgres(db) if db else contextlib.nullcontext() as url,
    ):
        server = start_eventcoord(Path(tmp) / "data", free_port(), url, None, log=Path(tmp) / "serve.log")
        try:
            yield server
        finally:
            server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--db", help="postgresql+asyncpg://user@host:port (a fresh database); default SQLite")
    p.add_argument(
        "--heartbeat", type=float, default=30.0, help="seconds between an agent's heartbeats at the real pace (30)"
    )
    p.add_argument(
        "--claim-every",
        type=float,
        default=60.0,
        help="seconds between an agent's issue claims (and queue pulls) at the real pace (60)",
    )
    p.add_argument(
        "--agents", type=int, default=200, help="simulated agents per step (200); the compression makes up the fleet"
    )
    p.add_argument(
        "--fleet", type=int, action="append", help="equivalent fleet sizes to run (repeatable); default: a sweep"
    )
    p.add_argument("--duration", type=float, default=20.0, help="measured seconds per step (20)")
    p.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds per step first (5)")
    p.add_argument("--connections", type=int, default=32, help="client connections (32)")
    p.add_argument("--p99-ms", type=float, default=25.0, help="the p99 a step must keep (25 ms)")
    p.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = p.parse_args(argv)
    fleets = args.fleet or [250, 500, 1000, 2000, 3000, 4000, 6000, 8000, 10000, 12000, 16000, 20000]
    backend = "postgresql" if args.db else "sqlite"
    print(
        f"backend={backend}; one agent = {COMMANDS_PER_AGENT_MINUTE} commands/min at heartbeat {args.heartbeat:g} s, "
        f"claim every {args.claim_every:g} s",
        flush=True,
    )
    results: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    with serving(args.db) as server:
        for k, fleet in enumerate(fleets):
            # at least two issue cycles per measured window: small fleets get fewer, faster agents
            compress = max(fleet / args.agents, 2 * args.claim_every / args.duration)
            r = asyncio.run(
                run_step(server, step=f"s{k}", agents=max(1, round(fleet / compress)), compress=compress, args=args)
            )
            results.append(r)
            print(fmt_step(r), flush=True)
            for cmd, v in r["per_command"].items():
                print(
                    f"      {cmd:<16} n={v['n']:>6}  p50 {v['p50_ms']:7.2f} ms  p99 {v['p99_ms']:7.2f} ms", flush=True
                )
            if r["errors"]:
                print(f"      refused/failed: {r['errors']}", flush=True)
            if passes(r, args.p99_ms):
                best = r
            elif not args.fleet:
                break
    if best is not None:
        print(
            f"\n{backend}: one server handles a fleet of {best['fleet']:,} agents (heartbeat every {args.heartbeat:g} "
            "s, an issue every "
            f"{args.claim_every:g} s) at p99 {best['p99_ms']} ms ≤ {args.p99_ms:g} ms: {best['commands_per_s']}/s, "
            f"{best['server_cpu_us_per_command']} us server CPU per command"
        )
    else:
        print(f"\n{backend}: no step kept p99 ≤ {args.p99_ms:g} ms")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "backend": backend,
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "steps": results,
                    "best": best,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
