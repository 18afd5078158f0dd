"""The cost of the faces: an MCP tool call vs. the same HTTP command, and the CLI's start-up.

Starts ``eventcoord serve`` (SQLite, no NATS) on a fresh data folder, then, side by side in
one run, times ``--calls`` sequential ``heartbeat_agent`` commands three ways: plain HTTP
(httpx, one keep-alive connection), an MCP tool call over stdio, and over streamable HTTP
(the SDK's client, one session each). Prints p50/p99 per way and the MCP overhead (MCP
p50 - HTTP p50). Then the CLI: wall time of ``--runs`` processes of ``python -c pass``
(the interpreter alone), ``eventcoord --help`` and ``eventcoord leases`` (a read over
HTTP, rendered as a table); medians, and the start-up above the bare interpreter.

    .venv/bin/python bench/interfaces.py                 # 500 calls, 15 CLI runs
    .venv/bin/python bench/interfaces.py --calls 2000 --runs 30
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
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from mcp import Client, StdioServerParameters

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} not ready")


def quantiles(ms: list[float]) -> tuple[float, float]:
    ordered = sorted(ms)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def timed(n: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    for _ in range(min(20, n)):  # warm-up
        await call()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await call()
        out.append((time.perf_counter() - t) * 1000)
    return out


async def calls(base: str, mcp_url: str, n: int) -> dict[str, list[float]]:
    env = {"EVENTCOORD_URL": base, "EVENTCOORD_TOKEN": TOKEN}
    results: dict[str, list[float]] = {}
    async with httpx.AsyncClient(base_url=base, headers={"authorization": f"Bearer {TOKEN}"}) as http:
        sid = (await http.post("/v1/commands", json={"type": "register_agent", "actor": "bench-http"})).json()[
            "result"
        ]["session_id"]

        async def plain() -> object:
            r = await http.post("/v1/commands", json={"type": "heartbeat_agent", "session_id": sid})
            assert r.status_code == 200
            return r

        results["HTTP command"] = await timed(n, plain)
    stdio = StdioServerParameters(command=sys.executable, args=["-m", "eventcoord.cli", "mcp"], env=env)
    for label, target in (("MCP tool, stdio", stdio), ("MCP tool, streamable HTTP", mcp_url)):
        async with Client(target) as client:
            await client.call_tool("register_agent", {"actor": "bench-mcp"})

            async def tool(client: Client = client) -> object:
                r = await client.call_tool("heartbeat_agent", {})
                assert not r.is_error, r.structured_content
                return r

            results[label] = await timed(n, tool)
    return results


def cli(base: str, runs: int) -> dict[str, list[float]]:
    env = {**os.environ, "EVENTCOORD_URL": base, "EVENTCOORD_TOKEN": TOKEN}
    script = str(Path(sys.executable).with_name("eventcoord"))
    ways = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "eventcoord --help": [script, "--help"],
        "eventcoord leases": [script, "leases"],
    }
    out: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(runs):
        for label, argv in ways.items():  # interleaved: load drifts hit every way alike
            t = time.perf_counter()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
            out[label].append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--runs", type=int, default=15)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ec-iface-bench-"))
    port, mcp_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "EVENTCOORD_BOOTSTRAP_TOKEN": TOKEN}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eventcoord.cli",
            "serve",
            "--data-dir",
            str(work),
            "--nats",
            "off",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    mcp = None
    try:
        wait_http(base + "/health", server)
        mcp = subprocess.Popen(
            [sys.executable, "-m", "eventcoord.cli", "mcp", "--transport", "http", "--port", str(mcp_port)],
            env={**os.environ, "EVENTCOORD_URL": base, "EVENTCOORD_TOKEN": TOKEN},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_http(f"http://127.0.0.1:{mcp_port}/mcp", mcp)
        timings = asyncio.run(calls(base, f"http://127.0.0.1:{mcp_port}/mcp", args.calls))
        print(f"heartbeat_agent, {args.calls} sequential calls each (ms)")
        http_p50 = quantiles(timings["HTTP command"])[0]
        for label, ms in timings.items():
            p50, p99 = quantiles(ms)
            extra = "" if label == "HTTP command" else f"   overhead p50 +{p50 - http_p50:.2f}"
            print(f"  {label:28s} p50 {p50:7.2f}  p99 {p99:7.2f}{extra}")
        startup = cli(base, args.runs)
        bare = statistics.median(startup["python -c pass"])
        print(f"CLI wall time, median of {args.runs} runs (ms)")
        for label, ms in startup.items():
            med = statistics.median(ms)
            extra = "" if label == "python -c pass" else f"   above the interpreter +{med - bare:.0f}"
            print(f"  {label:28s} {med:7.0f}{extra}")
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    finally:
        for proc in (mcp, server):
            if proc is not None:
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    main()
