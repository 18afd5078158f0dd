"""The publish gate's options of two subcommands: ``claim-issue … --record`` and ``verify-hold``.

``--record`` writes the grant into the repository's git config (``eventcoord.session``,
``eventcoord.issue``, ``eventcoord.fencingToken``) and the server that granted it
(``eventcoord.url``: verify-hold asks that server when neither ``--url`` nor
``EVENTCOORD_URL`` names one, so a push from an IDE checks the right server).
"""

from __future__ import annotations

import argparse
import sys

from eventcoord.cli.exchange import EXIT_OK, EXIT_USAGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from pathlib import Path
    from typing import Any

    from eventcoord.cli.exchange import Answer, Refusal, Server

KEYS = ("eventcoord.session", "eventcoord.issue", "eventcoord.fencingToken")
URL_KEY = "eventcoord.url"


def git(*args: str, cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run git, capturing its output."""
    import subprocess

    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def _in_repository() -> bool:
    return git("rev-parse", "--git-dir").returncode == 0


def server_url(given: str | None) -> str | None:
    """The server verify-hold asks: ``--url``, else ``EVENTCOORD_URL``, else the one recorded
    in git config by ``--record`` (None: the client's default)."""
    import os

    return given or os.environ.get("EVENTCOORD_URL") or git("config", "--get", URL_KEY).stdout.strip() or None


# --- claim-issue --record --------------------------------------------------------------


def record_option(p: argparse.ArgumentParser) -> None:
    """``claim-issue --record``: after a grant, write the hold into the repository's git config."""
    p.add_argument(
        "--record",
        dest="_record",
        action="store_true",
        help="after a grant, record the hold in this repository's git config (for the pre-push hook)",
    )

    def before(args: argparse.Namespace, values: dict[str, Any]) -> int | None:
        if args._record and not _in_repository():
            print("--record: the current directory is not inside a git repository", file=sys.stderr)
            return EXIT_USAGE
        return None

    def after(args: argparse.Namespace, values: dict[str, Any], answer: Answer) -> int:
        if not args._record:
            return EXIT_OK
        from eventcoord.client.locate import locate

        result = answer.payload()["result"]
        url = locate(args._url).url
        recorded = (values["session_id"], result["issue"], result["fencing_token"], url)
        for key, value in zip((*KEYS, URL_KEY), recorded, strict=True):
            git("config", key, str(value))
        print(
            f"recorded in git config: {KEYS[0]}={values['session_id']} {KEYS[1]}={result['issue']} "
            f"{KEYS[2]}={result['fencing_token']} {URL_KEY}={url}",
            file=sys.stderr,
        )
        return EXIT_OK

    p.set_defaults(_before=before, _after=after)


# --- verify-hold: the recorded server; name the current holder ----------------------------


def verify_hold_options(p: argparse.ArgumentParser) -> None:
    """``verify-hold``: asks the server recorded with the hold when none is named; a
    ``NOT_FRESH_HOLDER`` refusal names the current holder."""

    def before(args: argparse.Namespace, values: dict[str, Any]) -> int | None:
        args._url = server_url(args._url)
        return None

    def on_refused(args: argparse.Namespace, refused: Refusal, server: Server) -> dict[str, Any]:
        if refused.code != "NOT_FRESH_HOLDER":
            return {}
        from eventcoord.cli.exchange import Unreachable, read_path
        from eventcoord.cli.subcommands import SUBCOMMANDS

        holder = refused.details.get("holder")
        if holder is None:  # a stale fencing token: ask who holds the issue now
            try:
                state = server.read(*read_path(SUBCOMMANDS["state"], {"issue": args.issue, "as": args.session_id}))
                holder = state.payload().get("holder") if state.refusal() is None else None
            except (Unreachable, ValueError):  # naming the holder is a courtesy; the refusal stands
                holder = None
        if not holder:
            return {"current_holder": "nobody"}
        return {"current_holder": f"{holder.get('actor_key')} (session {holder.get('session_id')})"}

    p.set_defaults(_before=before, _on_refused=on_refused)
