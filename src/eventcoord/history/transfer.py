"""Export, replay and archive (docs/protocol.md#history): the log to a file, a file into an empty store,
a prefix of the log moved to a file.

Files are JSON Lines whose lines are exactly the ``/v1/events`` objects, in position order
(``.gz``: gzip-compressed), or CSV with the same fields (``data`` and ``metadata`` as JSON
text). These functions run on a plain synchronous ``Connection``; the CLI
(``eventcoord.cli.history``) opens it.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from collections.abc import Iterable, Iterator
from typing import IO, Any, cast

import msgspec
from sqlalchemy import Connection, delete, func, insert, select

from eventcoord.auth import ensure_workspace
from eventcoord.codec import EventMetadata, WireEvent, encode, parse_time
from eventcoord.history import chain, logreads, snapshots
from eventcoord.history.logreads import Filters
from eventcoord.store import log
from eventcoord.store.schema import archives, event_hashes, events, relay_state, store_head, stream_heads

CSV_FIELDS = ("position", "stream", "version", "type", "recorded_at", "data", "metadata", "hash")
PAGE = 5000


class ReplayError(ValueError):
    """A file that cannot be replayed into this store; the message says why."""


def iter_export(conn: Connection, after: int, workspace: str | None, f: Filters) -> Iterator[WireEvent]:
    """The log's events after ``after`` matching ``f``, page by page, in position order, with their hashes."""
    while True:
        page = chain.with_hashes(conn, logreads.read_filtered(conn, after, PAGE, workspace, f))
        if not page:
            return
        yield from page
        after = page[-1].position


def write_jsonl(out: IO[bytes], items: Iterable[WireEvent]) -> int:
    """One JSON object a line; returns the lines written."""
    n = 0
    for ev in items:
        out.write(encode(ev) + b"\n")
        n += 1
    return n


def write_csv(out: IO[bytes], items: Iterable[WireEvent]) -> int:
    """A header, then one row an event (``data``/``metadata`` as JSON text)."""
    text = io.TextIOWrapper(out, encoding="utf-8", newline="")
    w = csv.writer(text)
    w.writerow(CSV_FIELDS)
    n = 0
    for ev in items:
        w.writerow(
            [
                ev.position,
                ev.stream,
                ev.version,
                ev.type,
                ev.recorded_at,
                bytes(ev.data).decode(),
                bytes(ev.metadata).decode(),
                ev.hash or "",
            ]
        )
        n += 1
    text.flush()
    text.detach()
    return n


def open_read(path: str) -> IO[bytes]:
    """A file for reading, gunzipped when it is gzip."""
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")


def read_lines(paths: Iterable[str]) -> Iterator[WireEvent]:
    """Events from JSON Lines files, in file order."""
    decoder = msgspec.json.Decoder(WireEvent)
    for path in paths:
        with open_read(path) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield decoder.decode(line)
                except msgspec.DecodeError as e:
                    raise ReplayError(f"{path}:{number}: not an event line ({e})") from None


def replay(conn: Connection, items: Iterable[WireEvent], allow_gaps: bool = False, keep_chain: bool = True) -> int:
    """Load events into an empty store, positions kept; the caller rebuilds the read models.

    Positions must rise strictly and, unless ``allow_gaps``, leave no gap (from 1, or from
    the start of the first file: an archive's). A line repeating the previous position (two
    overlapping files) must be the same event and is skipped. The events' hashes are kept as
    the stored chain (unless ``keep_chain`` is false: the chainer then hashes them anew):
    check the files first (``history/verify.py``), as ``eventcoord replay`` does.
    """
    if log.head(conn) != 0 or conn.execute(select(func.count()).select_from(events)).scalar_one() != 0:
        raise ReplayError("the target store is not empty: replay loads into an empty store only")
    last = 0
    rows: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    heads: dict[tuple[str, str], int] = {}
    seen_ws: dict[str, int] = {}
    n = 0
    prev: WireEvent | None = None
    for ev in items:
        if ev.position <= last:
            if prev is not None and ev.position == prev.position and encode(ev) == encode(prev):
                continue
            raise ReplayError(f"position {ev.position} after {last}: positions must rise")
        if last and ev.position != last + 1 and not allow_gaps:
            raise ReplayError(f"position {ev.position} after {last}: a gap (a filtered export? use --allow-gaps)")
        meta = msgspec.json.decode(bytes(ev.metadata), type=EventMetadata)
        us = parse_time(ev.recorded_at)
        rows.append(
            {
                "position": ev.position,
                "workspace": meta.workspace,
                "stream": ev.stream,
                "version": ev.version,
                "type": ev.type,
                "data": bytes(ev.data).decode(),
                "metadata": bytes(ev.metadata).decode(),
                "recorded_us": us,
            }
        )
        if ev.hash is not None and keep_chain and not allow_gaps:  # a filtered copy keeps no chain
            links.append({"position": ev.position, "hash": ev.hash})
        key = (meta.workspace, ev.stream)
        heads[key] = max(heads.get(key, 0), ev.version)
        seen_ws.setdefault(meta.workspace, us)
        last, prev = ev.position, ev
        n += 1
        if len(rows) >= PAGE:
            conn.execute(insert(events), rows)
            rows = []
            if links:
                conn.execute(insert(event_hashes), links)
                links = []
    if rows:
        conn.execute(insert(events), rows)
    if links:
        conn.execute(insert(event_hashes), links)
    if heads:
        conn.execute(delete(stream_heads))
        conn.execute(insert(stream_heads), [{"workspace": w, "stream": s, "version": v} for (w, s), v in heads.items()])
    conn.execute(store_head.update().where(store_head.c.id == 1).values(position=last))
    for ws, us in seen_ws.items():
        ensure_workspace(conn, ws, us)
    return n


def relay_checkpoint(conn: Connection) -> int | None:
    """The lowest publish checkpoint of the relays (None: nothing relays this store)."""
    v = conn.execute(select(func.min(relay_state.c.position))).scalar()
    return None if v is None else int(v)


def archive_file(path: str, items: Iterable[WireEvent]) -> int:
    """Write events to ``path`` as gzip JSON Lines, durably (a temporary file, then renamed)."""
    tmp = f"{path}.partial"
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb") as gz:
            n = write_jsonl(gz, items)  # type: ignore[arg-type]
        raw.flush()
        os.fsync(raw.fileno())
    os.replace(tmp, path)
    return n


def drop_prefix(conn: Connection, before: int, file: str, count: int, now_us: int) -> int:
    """Record the archive and delete the events below ``before`` (one transaction)."""
    snap = snapshots.nearest(conn, before - 1)
    if snap is None or snap.position != before - 1:
        raise ReplayError(f"no snapshot at {before - 1}: take one before archiving")
    conn.execute(insert(archives).values(before_position=before, file=file, events=count, archived_us=now_us))
    if conn.dialect.name == "postgresql":
        # The immutability trigger lets through exactly this: rows below the declared boundary.
        conn.exec_driver_sql(f"SET LOCAL eventcoord.archive_before = '{int(before)}'")
    # The chain goes on from the archive's last link (kept: what the next event links to).
    chain.chain_all(conn, before - 1)
    conn.execute(delete(event_hashes).where(event_hashes.c.position < before - 1))
    return int(conn.execute(delete(events).where(events.c.position < before)).rowcount)
