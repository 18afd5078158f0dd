"""Client-side identity hints for register_agent (docs/protocol.md#identity): the process-ancestry digest."""

from __future__ import annotations

import hashlib
import os


def process_ancestry(pid: int | None = None) -> str | None:
    """A digest of the parent process and its start time (None where /proc is unavailable).

    The parent is the agent that started this client (the MCP server's host, a shell); the
    start time keeps a reused pid from meaning the same process.
    """
    parent = os.getppid() if pid is None else pid
    try:
        with open(f"/proc/{parent}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 22 (starttime) counts from the end of the command name, which may hold spaces.
    fields = stat[stat.rfind(b")") + 2 :].split()
    started = fields[19].decode() if len(fields) > 19 else "0"
    return hashlib.sha256(f"{parent}:{started}".encode()).hexdigest()[:24]
