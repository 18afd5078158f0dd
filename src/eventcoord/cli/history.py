"""Subcommands of history (docs/protocol.md#history): rebuild [--check] [--projection], export,
verify, replay, archive.

Each opens the database named by ``--db`` / ``EVENTCOORD_DB_URL`` (like ``migrate``);
none needs a running server, and each may run beside one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import IO, Any, TypeVar

from eventcoord.cli.server import _common, _settings

T = TypeVar("T")


async def _with_store(url: str, fn: Callable[[Any], Any]) -> Any:
    from eventcoord.store import open_store

    store = open_store(url)
    await store.start()
    try:
        await store.migrate()
        return await fn(store)
    finally:
        await store.close()


def _run(args: argparse.Namespace, fn: Callable[[Any], Any]) -> Any:
    import asyncio

    return asyncio.run(_with_store(_settings(args).database_url, fn))


def cmd_rebuild(args: argparse.Namespace) -> int:
    """Rebuild the read models from the log (or check that a rebuild would equal them)."""
    import msgspec

    import eventcoord.projections as projections
    from eventcoord.history import check
    from eventcoord.history.snapshots import TABLES, table_rows

    only = args.projection
    if only is not None and only not in projections.OWNED:
        print(f"eventcoord: unknown projection {only!r}; one of: {', '.join(projections.OWNED)}", file=sys.stderr)
        return 2

    if args.check:
        from eventcoord.history import chain

        async def both(store: Any) -> tuple[int, list[Any], tuple[int, Any]]:
            head, diffs = await check.check(store, only)
            return head, diffs, await store.query(chain.verify_stored)

        head, diffs, (chained, broken) = _run(args, both)
        for d in diffs:
            print(msgspec.json.encode(d).decode())
        what = f"projection {only}" if only else "every read model"
        if broken is not None:
            print(msgspec.json.encode({"chain": {"position": broken.position, "reason": broken.reason}}).decode())
            print(
                f"rebuild --check: the stored hash chain breaks at position {broken.position}: {broken.reason}",
                file=sys.stderr,
            )
        if diffs:
            print(f"rebuild --check: {len(diffs)} rows differ ({what}, log head {head})", file=sys.stderr)
        if diffs or broken is not None:
            return 1
        print(
            f"rebuild --check: {what} equals a rebuild from the log (head {head}); "
            f"the hash chain holds ({chained} events)"
        )
        return 0

    def rebuild(conn: Any) -> int:
        base, chunks = check.base_of(conn)
        rows = {name: [r for data in datas for r in table_rows(TABLES[name], data)] for name, datas in chunks.items()}
        return projections.rebuild(conn, only=only, base_position=base, base_rows=rows)

    applied = _run(args, lambda s: s.transact(rebuild, retry=False))
    print(f"rebuilt {'read model ' + only if only else 'read models'} from {applied} events")
    return 0


def _filters(args: argparse.Namespace) -> Any:
    from eventcoord.codec import parse_time
    from eventcoord.history.logreads import Filters

    def t(v: str | None, name: str) -> int | None:
        if v is None:
            return None
        try:
            return parse_time(v)
        except ValueError:
            raise SystemExit(f"eventcoord: --{name} must be an RFC 3339 time, got {v!r}") from None

    return Filters(
        types=tuple(args.type or ()),
        since_us=t(args.since, "since"),
        until_us=t(args.until, "until"),
        until_position=args.until_position,
    )


def cmd_export(args: argparse.Namespace) -> int:
    """The log (filtered) as JSON Lines or CSV, in position order."""
    from eventcoord.history import transfer

    f = _filters(args)
    out_cm: AbstractContextManager[IO[bytes]] = open(args.out, "wb") if args.out else nullcontext(sys.stdout.buffer)  # noqa: SIM115

    async def run(store: Any) -> int:
        def work(conn: Any) -> int:
            with out_cm as out:
                items = transfer.iter_export(conn, args.after, args.workspace, f)
                return transfer.write_csv(out, items) if args.format == "csv" else transfer.write_jsonl(out, items)

        n: int = await store.query(work)
        return n

    n = _run(args, run)
    if args.out:
        print(f"exported {n} events to {args.out}", file=sys.stderr)
    return 0


def _verified(args: argparse.Namespace, prog: str) -> Any:
    """The files' log checked (chain and consistency); None, after one line on stderr, when refused."""
    from eventcoord.history import transfer, verify

    try:
        return verify.verify(transfer.read_lines(args.files), allow_gaps=args.allow_gaps, unchained=args.unchained)
    except (verify.Refused, transfer.ReplayError) as e:
        print(f"eventcoord {prog}: refused: {e}", file=sys.stderr)
    except OSError as e:
        print(f"eventcoord {prog}: {e}", file=sys.stderr)
    return None


def cmd_verify(args: argparse.Namespace) -> int:
    """Check exported JSON Lines files without a server: the hash chain and that the events follow one another."""
    v = _verified(args, "verify")
    if v is None:
        return 1
    print(f"verified {v.checked} events (positions up to {v.last}); last hash {v.prev_hash}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Load JSON Lines files (an archive, then the live log) into an empty store and build the read models.

    The files are checked first (``eventcoord verify``): a refused log opens no store.
    """
    import eventcoord.projections as projections
    from eventcoord.history import transfer

    if _verified(args, "replay") is None:
        return 1

    async def run(store: Any) -> tuple[int, int]:
        def load(conn: Any) -> tuple[int, int]:
            items = transfer.read_lines(args.files)
            n = transfer.replay(conn, items, allow_gaps=args.allow_gaps, keep_chain=not args.unchained)
            return n, projections.rebuild(conn)

        result: tuple[int, int] = await store.transact(load, retry=False)
        return result

    try:
        loaded, applied = _run(args, run)
    except transfer.ReplayError as e:
        print(f"eventcoord replay: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # the read models refused what the checks let through: one line, rolled back
        print(f"eventcoord replay: refused: the read models cannot be built ({type(e).__name__}: {e})", file=sys.stderr)
        return 1
    print(f"replayed {loaded} events; read models built from {applied}")
    return 0


def cmd_archive(args: argparse.Namespace) -> int:
    """Move the events below --before to a gzip JSON Lines file, after a snapshot at --before - 1."""
    import os

    from eventcoord.history import snapshots, transfer
    from eventcoord.history.logreads import Filters
    from eventcoord.history.worker import take_snapshot
    from eventcoord.store import log

    before: int = args.before

    async def run(store: Any) -> str | None:
        def plan(conn: Any) -> tuple[int, int, int | None]:
            archive = snapshots.archive_boundary(conn)
            return log.head(conn), (archive.before if archive else 1), transfer.relay_checkpoint(conn)

        head, start, relayed = await store.query(plan)
        if not start < before <= head + 1:
            return f"--before must be in {start + 1}..{head + 1} (the log holds {start}..{head})"
        if relayed is not None and before - 1 > relayed and not args.unpublished:
            return (
                f"events up to {relayed} are published to NATS; archiving up to {before - 1} would drop unpublished "
                "ones (--unpublished to do it anyway)"
            )
        if await take_snapshot(store, before - 1) != before - 1:
            return f"could not snapshot position {before - 1}"
        from eventcoord.store import dbclock

        path = os.path.abspath(args.out)
        count = await store.query(
            lambda c: transfer.archive_file(
                path, transfer.iter_export(c, start - 1, None, Filters(until_position=before - 1))
            )
        )
        deleted = await store.transact(
            lambda c: transfer.drop_prefix(c, before, path, count, dbclock.read(c)[0]), retry=False
        )
        print(f"archived {count} events (positions {start}..{before - 1}) to {path}; {deleted} removed from the log")
        return None

    problem = _run(args, run)
    if problem:
        print(f"eventcoord archive: {problem}", file=sys.stderr)
        return 1
    return 0


def _unchained(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--unchained",
        action="store_true",
        help="a log exported before events carried hashes: check all but the chain (a copy hashes them anew)",
    )


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """rebuild, export, verify, replay, archive."""
    rebuild = sub.add_parser("rebuild", help="rebuild the read models from the log (--check: compare only)")
    _common(rebuild)
    rebuild.add_argument(
        "--check", action="store_true", help="rebuild into scratch, print differing rows, exit 1 on any"
    )
    rebuild.add_argument(
        "--projection", help="only this read model (sessions, leases, files, messages, queue, named_leases)"
    )
    rebuild.set_defaults(fn=cmd_rebuild)

    export = sub.add_parser("export", help="write the log as JSON Lines or CSV (the filters of /v1/events)")
    _common(export)
    export.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
    export.add_argument("--workspace", help="only this workspace")
    export.add_argument("--type", action="append", help="only this event type (repeatable)")
    export.add_argument("--after", type=int, default=0, help="only positions after this")
    export.add_argument("--until-position", dest="until_position", type=int, help="only positions up to this one")
    export.add_argument("--since", help="RFC 3339 on recorded_at, inclusive")
    export.add_argument("--until", help="RFC 3339 on recorded_at, exclusive")
    export.add_argument("--out", help="file to write (default: standard output)")
    export.set_defaults(fn=cmd_export)

    replay = sub.add_parser("replay", help="load exported JSON Lines (archive, then live) into an empty store")
    _common(replay)
    replay.add_argument("files", nargs="+", help="JSON Lines files (.gz too), in position order")
    replay.add_argument(
        "--allow-gaps", dest="allow_gaps", action="store_true", help="accept a filtered export (positions with gaps)"
    )
    _unchained(replay)
    replay.set_defaults(fn=cmd_replay)

    verify = sub.add_parser(
        "verify", help="check exported JSON Lines without a server: the hash chain, and that the events follow"
    )
    verify.add_argument("files", nargs="+", help="JSON Lines files (.gz too), in position order")
    verify.add_argument("--allow-gaps", dest="allow_gaps", action="store_true", help="a filtered export")
    _unchained(verify)
    verify.set_defaults(fn=cmd_verify)

    archive = sub.add_parser("archive", help="move the events below a position to a gzip JSON Lines file")
    _common(archive)
    archive.add_argument("--before", type=int, required=True, help="archive every event with a smaller position")
    archive.add_argument("--out", required=True, help="the archive file to write (JSON Lines, gzip)")
    archive.add_argument(
        "--unpublished", action="store_true", help="archive even events the NATS relay has not published yet"
    )
    archive.set_defaults(fn=cmd_archive)
