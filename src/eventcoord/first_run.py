"""First run (docs/protocol.md#clients): ``serve`` mints an admin token of workspace ``default`` into the data folder.

Only when ``EVENTCOORD_BOOTSTRAP_TOKEN`` is unset. The token goes to
``<data-dir>/admin-token`` (mode 0600) and only its path is ever printed; the CLI, the MCP
server and the hook read it from there. Later starts reuse the file's token (registering it
again if the store is new), so the file stays valid across restarts.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sqlalchemy import Connection, select

from eventcoord.auth import hash_token, new_token, store_token
from eventcoord.config import Settings
from eventcoord.store import dbclock, open_store
from eventcoord.store.schema import tokens

TOKEN_FILE = "admin-token"
logger = logging.getLogger("eventcoord.first_run")


def write_secret(path: Path, secret: str) -> None:
    """Write ``secret`` to ``path`` readable by its owner only, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, secret.encode() + b"\n")
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)  # the umask cannot widen it, but an existing file's mode could
    os.replace(tmp, path)


async def ensure_admin_token(settings: Settings) -> Path | None:
    """The admin-token file's path when it holds a token of this store, minting one if needed.

    None when the bootstrap token is set, or when the store already has tokens of
    ``default`` that the file (absent or stale) is not one of: then nothing is written.
    """
    if settings.bootstrap_token:
        return None
    path = Path(settings.data_dir).absolute() / TOKEN_FILE
    existing = path.read_text().strip() if path.is_file() else ""
    candidate = existing or new_token()
    store = open_store(settings.database_url)
    await store.start()
    try:
        await store.migrate()

        def decide(conn: Connection) -> str:
            if (
                existing
                and conn.execute(select(tokens.c.token_hash).where(tokens.c.token_hash == hash_token(existing))).first()
            ):
                return "reuse"
            has_default = conn.execute(
                select(tokens.c.token_hash).where(tokens.c.workspace == "default").limit(1)
            ).first()
            if has_default is not None:
                return "skip"
            store_token(conn, candidate, "default", "admin", dbclock.read(conn)[0])
            return "minted"

        if not existing:
            write_secret(path, candidate)  # before the commit: a token is never stored unwritten
        outcome = await store.transact(decide)
    finally:
        await store.close()
    if outcome == "skip":
        if not existing:
            path.unlink(missing_ok=True)
        else:
            logger.warning("%s is not a token of this store; it was left alone", path)
        return None
    return path
