"""First paint of the dashboard for a big fleet: 10,000 agents and 100,000 file claims.

Starts ``eventcoord serve --nats off`` on a fresh data folder (SQLite; ``--db`` names a
PostgreSQL server URL, a fresh database is created there and dropped afterwards), seeds it
through the HTTP API — ``--agents`` sessions (10,000), ``--claims`` file claims (100,000, in
commands of 100 paths by 1,000 of the agents), 2,000 issue leases, 300 refused claims
(conflicts), 300 queue items and 200 messages — then opens ``/ui`` in Debian's headless
chromium (Playwright, ``/usr/bin/chromium``) ``--loads`` times, each in a fresh browser
context with a reader token already stored (the prompt is asked once, not timed).

For each load it reads, in milliseconds since navigation start:
  fcp     first contentful paint (the page shell),
  ready   every view's bounded reads answered and put in the DOM,
  painted the frame after that (requestAnimationFrame + task): the first paint of data;
and the slowest API read with its size. Prints each load and the median.

    .venv/bin/python bench/dashboard_first_paint.py
    .venv/bin/python bench/dashboard_first_paint.py --db postgresql+asyncpg://postgres@127.0.0.1:5432/postgres
    .venv/bin/python bench/dashboard_first_paint.py --agents 1000 --claims 10000 --loads 3   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

TOKEN = "bench-token"
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def fan_out(
    client: httpx.AsyncClient, bodies: list[dict[str, Any]], width: int = 24, refusal: str | None = None
) -> list[dict[str, Any]]:
    """POST every command with ``width`` in flight; each must succeed (or be refused with ``refusal``)."""
    out: list[dict[str, Any]] = [{} for _ in bodies]
    queue = list(enumerate(bodies))

    async def worker() -> None:
        while queue:
            i, body = queue.pop()
            r = await client.post("/v1/commands", json=body)
            if r.status_code != 200 and not (refusal and r.json()["error"]["code"] == refusal):
                raise RuntimeError(f"{body['type']}: {r.status_code} {r.text[:300]}")
            out[i] = r.json()

    await asyncio.gather(*(worker() for _ in range(width)))
    return out


async def seed(base: str, agents: int, claims: int) -> str:
    """Fill the store through the API; return a reader token."""
    async with httpx.AsyncClient(base_url=base, headers={"authorization": f"Bearer {TOKEN}"}, timeout=120) as c:
        t0 = time.perf_counter()
        regs = await fan_out(
            c,
            [
                {
                    "type": "register_agent",
                    "actor": f"agent-{i:05d}",
                    "host": f"host-{i % 97:02d}",
                    "working_on": f"P{i % 20}-{i}" if i % 3 == 0 else None,
                }
                for i in range(agents)
            ],
        )
        sids = [r["result"]["session_id"] for r in regs]
        print(f"  {agents:,} agents registered in {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        await fan_out(
            c, [{"type": "configure_project", "project": f"P{p}", "wip_limit": 100_000} for p in range(20)], 4
        )
        leases = min(2000, agents)
        await fan_out(
            c,
            [
                {"type": "claim_issue", "session_id": sids[i], "project": f"P{i % 20}", "issue": f"P{i % 20}-{i}"}
                for i in range(leases)
            ],
        )
        print(f"  {leases:,} leases in {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        per = 100
        holders = claims // per
        bodies = []
        for h in range(holders):
            top = f"svc{h % 40}"
            bodies.append(
                {
                    "type": "claim_files",
                    "session_id": sids[h % len(sids)],
                    "issue": f"P{h % 20}-{h}",
                    "paths": [f"{top}/mod{h}/pkg{k // 10}/file{k}.py" for k in range(per)],
                }
            )
        await fan_out(c, bodies, 8)
        print(f"  {holders * per:,} file claims in {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        await fan_out(
            c,
            [
                {
                    "type": "claim_files",
                    "session_id": sids[-1 - i],
                    "issue": f"X-{i}",
                    "paths": [f"svc{i % 40}/mod{i % max(1, holders)}/pkg0/file0.py"],
                }
                for i in range(300)
            ],
            refusal="FILES_CLAIMED",
        )
        await fan_out(
            c,
            [
                {"type": "enqueue_work", "project": f"P{i % 20}", "issue": f"Q-{i}", "priority": i % 7}
                for i in range(300)
            ],
        )
        await fan_out(
            c,
            [
                {
                    "type": "post_message",
                    "session_id": sids[i],
                    "channel": f"issue:P{i % 20}-{i}",
                    "body": f"status update {i}: tests green, pushing soon",
                }
                for i in range(200)
            ],
        )
        print(f"  conflicts, queue, messages in {time.perf_counter() - t0:.1f} s", flush=True)
        r = await c.post("/v1/commands", json={"type": "issue_token", "role": "reader"})
        token: str = r.json()["result"]["token"]
        return token


async def copy_sqlite_into_postgres(sqlite_path: str, pg_url: str) -> None:
    """Load every row of a seeded SQLite store into a migrated, empty PostgreSQL store.

    Same schema (one Alembic chain), so the rows are the same; booleans are converted and
    serial sequences moved past the copied ids. Used by ``--copy-from``: seeding PostgreSQL
    through the API takes far longer (``claim_files`` on PostgreSQL slows down with tens
    of thousands of live claims), and first paint only reads.
    """
    import sqlite3

    import asyncpg

    lite = sqlite3.connect(sqlite_path)
    tables = [
        r[0]
        for r in lite.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != "
            "'alembic_version'"
        )
    ]
    pg = await asyncpg.connect(pg_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        for table in tables:
            kinds = {
                r["column_name"]: r["data_type"]
                for r in await pg.fetch(
                    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = $1", table
                )
            }
            if table != "events" and await pg.fetchval(f'SELECT count(*) FROM "{table}"'):
                await pg.execute(f'DELETE FROM "{table}"')
            cur = lite.execute(f'SELECT * FROM "{table}"')
            columns = [d[0] for d in cur.description]
            flags = [kinds.get(c) == "boolean" for c in columns]
            records = [
                tuple(bool(v) if f and v is not None else v for v, f in zip(row, flags, strict=True)) for row in cur
            ]
            if records:
                await pg.copy_records_to_table(table, records=records, columns=columns)
        for r in await pg.fetch(
            "SELECT table_name, column_name FROM information_schema.columns WHERE column_default LIKE 'nextval%'"
        ):
            await pg.execute(
                f"SELECT setval(pg_get_serial_sequence('\"{r['table_name']}\"', '{r['column_name']}'), "
                f'COALESCE((SELECT max("{r["column_name"]}") FROM "{r["table_name"]}"), 0) + 1, false)'
            )
        await pg.execute("ANALYZE")
    finally:
        await pg.close()
        lite.close()


MEASURE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const mark = (n) => (performance.getEntriesByName(n)[0] || {}).startTime;
  const api = performance.getEntriesByType('resource').filter((e) => e.name.includes('/v1/') && \
!e.name.includes('/stream'));
  const slow = api.reduce((a, b) => (b.duration > (a ? a.duration : -1) ? b : a), null);
  return {
    fcp: mark('first-contentful-paint'), ready: mark('dashboard-ready'), painted: mark('dashboard-painted'),
    reads: api.length, bytes: api.reduce((s, e) => s + (e.encodedBodySize || 0), 0),
    slowest: slow ? [slow.name.replace(location.origin, ''), slow.duration, slow.encodedBodySize] : null,
    render: performance.getEntriesByType('measure').filter((e) => e.name.startsWith('render:'))\
.reduce((s, e) => s + e.duration, 0),
    renders: performance.getEntriesByType('measure').filter((e) => e.name.startsWith('render:'))\
.map((e) => [e.name, Math.round(e.duration)]),
    dom: document.querySelectorAll('*').length, nav: nav ? nav.duration : null,
    timeline: performance.getEntriesByType('resource').map((e) => [e.name.replace(location.origin, ''), \
Math.round(e.startTime), Math.round(e.responseEnd), e.encodedBodySize]),
  };
}"""


def measure(base: str, reader: str, loads: int, screenshot: str | None = None) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    results = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            for _ in range(loads):
                ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
                ctx.add_init_script(f"sessionStorage.setItem('eventcoord.token', {reader!r})")
                page = ctx.new_page()
                page.goto(base + "/ui")
                page.wait_for_function(
                    "() => performance.getEntriesByName('dashboard-painted').length > 0", timeout=60_000
                )
                m = page.evaluate(MEASURE)
                m["agents_rows"] = page.locator("#panel-agents tbody tr").count()
                m["tree_rows"] = page.locator("#panel-claims li").count()
                results.append(m)
                if screenshot:
                    page.screenshot(path=screenshot, full_page=True)
                ctx.close()
        finally:
            browser.close()
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--agents", type=int, default=10_000)
    p.add_argument("--claims", type=int, default=100_000)
    p.add_argument("--loads", type=int, default=7)
    p.add_argument("--verbose", action="store_true", help="print every request's start and end")
    p.add_argument("--work", default=None, help="data folder (SQLite); with --reuse, measure an earlier seed again")
    p.add_argument("--screenshot", default=None, help="save the last load's page as this PNG")
    p.add_argument(
        "--copy-from",
        default=None,
        help="with --db: load the rows of this seeded SQLite file instead of seeding through the API",
    )
    p.add_argument("--reuse", action="store_true", help="skip seeding when --work already holds a seeded store")
    p.add_argument(
        "--db", default=None, help="a PostgreSQL server URL (postgresql+asyncpg://…/postgres); default SQLite"
    )
    args = p.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ec-ui-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    db_url, drop = f"sqlite+aiosqlite:///{work}/eventcoord.db", None
    if args.db:
        import asyncpg

        name = f"ec_ui_bench_{uuid.uuid4().hex[:8]}"
        admin = args.db.replace("postgresql+asyncpg://", "postgresql://")

        async def pg(sql: str) -> None:
            conn = await asyncpg.connect(admin)
            try:
                await conn.execute(sql)
            finally:
                await conn.close()

        asyncio.run(pg(f'CREATE DATABASE "{name}"'))
        db_url, drop = args.db.rsplit("/", 1)[0] + "/" + name, (pg, name)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "eventcoord.cli",
        "serve",
        "--db",
        db_url,
        "--data-dir",
        str(work / "data"),
        "--nats",
        "off",
        "--port",
        str(port),
        "--ttl-seconds",
        "86400",
    ]
    server = subprocess.Popen(
        cmd,
        env={**os.environ, "EVENTCOORD_BOOTSTRAP_TOKEN": TOKEN},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        backend = "PostgreSQL" if args.db else "SQLite"
        print(f"seeding {backend} through the API:", flush=True)
        if args.copy_from and args.db:
            t0 = time.perf_counter()
            asyncio.run(copy_sqlite_into_postgres(args.copy_from, db_url))
            print(f"  copied the rows of {args.copy_from} in {time.perf_counter() - t0:.1f} s")
            r = httpx.post(
                base + "/v1/commands",
                json={"type": "issue_token", "role": "reader"},
                headers={"authorization": f"Bearer {TOKEN}"},
            )
            reader = r.json()["result"]["token"]
        elif args.reuse and (work / "eventcoord.db").exists() and not args.db:
            r = httpx.post(
                base + "/v1/commands",
                json={"type": "issue_token", "role": "reader"},
                headers={"authorization": f"Bearer {TOKEN}"},
            )
            reader = r.json()["result"]["token"]
            print("  (reusing the seeded store in --work)")
        else:
            reader = asyncio.run(seed(base, args.agents, args.claims))
        head = httpx.get(base + "/health").json()["head"]
        print(f"log head {head:,}; opening /ui {args.loads} times in headless chromium", flush=True)
        results = measure(base, reader, args.loads, args.screenshot)
        for i, m in enumerate(results, 1):
            s = m["slowest"]
            print(
                f"  load {i}: fcp {m['fcp']:.0f} ms, ready {m['ready']:.0f} ms, painted {m['painted']:.0f} ms, "
                f"rendering {m['render']:.0f} ms; "
                f"{m['reads']} reads, {m['bytes'] / 1024:.0f} KiB; slowest {s[0]} {s[1]:.0f} ms "
                f"({s[2] / 1024:.0f} KiB); "
                f"{m['agents_rows']} agent rows, {m['tree_rows']} tree rows, {m['dom']} elements"
            )
            if args.verbose:
                print("      rendering:", ", ".join(f"{n[7:]} {d} ms" for n, d in m["renders"]))
                for name, start, end, size in m["timeline"]:
                    print(f"      {start:5d} → {end:5d} ms  {size / 1024:6.0f} KiB  {name}")
        med = {k: statistics.median(m[k] for m in results) for k in ("fcp", "ready", "painted")}
        print(
            f"median ({backend}, {args.agents:,} agents, {args.claims:,} claims): first contentful paint "
            f"{med['fcp']:.0f} ms, data painted {med['painted']:.0f} ms "
            f"(max {max(m['painted'] for m in results):.0f} ms)"
        )
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if drop is not None:
            asyncio.run(drop[0](f'DROP DATABASE IF EXISTS "{drop[1]}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
