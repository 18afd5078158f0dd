"""The publish gate where the damage happens (SPEC §7): verify-hold, the pre-push hook, --record.

``claim-issue … --record`` writes the grant into the repository's git config
(``eventcoord.session``, ``eventcoord.issue``, ``eventcoord.fencingToken``) and the server
that granted it (``eventcoord.url``: verify-hold asks that server when neither ``--url`` nor
``EVENTCOORD_URL`` names one, so a push from an IDE checks the right server);
``hook install`` writes a ``pre-push`` hook that runs ``verify-hold`` with them. The push is
refused only when verify-hold is refused by the service (exit 1: ``NOT_FRESH_HOLDER`` names
the current holder); no recorded hold, or no server, passes with a warning.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventcoord.cli.ops import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXTRAS

if TYPE_CHECKING:
    import subprocess

    from eventcoord.client import Client, Refused, Reply

MARKER = "# eventcoord pre-push hook"
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


def _record_option(p: argparse.ArgumentParser) -> None:
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

    def after(args: argparse.Namespace, values: dict[str, Any], reply: Reply) -> int:
        if not args._record:
            return EXIT_OK
        from eventcoord.client.locate import locate

        result = reply.payload()["result"]
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


def _verify_hold_options(p: argparse.ArgumentParser) -> None:
    def before(args: argparse.Namespace, values: dict[str, Any]) -> int | None:
        args._url = server_url(args._url)
        return None

    def on_refused(args: argparse.Namespace, refused: Refused, client: Client) -> dict[str, Any]:
        if refused.code != "NOT_FRESH_HOLDER":
            return {}
        from eventcoord.client import Refused, Unreachable

        holder = refused.details.get("holder")
        if holder is None:  # a stale fencing token: ask who holds the issue now
            try:
                state = client.get_issue_state(args.issue, as_=args.session_id).holder
                holder = None if state is None else {"session_id": state.session_id, "actor_key": state.actor_key}
            except (Refused, Unreachable):  # naming the holder is a courtesy; the refusal stands
                holder = None
        if not holder:
            return {"current_holder": "nobody"}
        return {"current_holder": f"{holder.get('actor_key')} (session {holder.get('session_id')})"}

    p.set_defaults(_before=before, _on_refused=on_refused)


EXTRAS["claim_issue"] = _record_option
EXTRAS["verify_hold"] = _verify_hold_options


# --- hook install / hook pre-push ------------------------------------------------------


def hook_script() -> str:
    """The pre-push hook: this installation's eventcoord, else the one on PATH."""
    import shlex

    python = shlex.quote(sys.executable)
    return (
        "#!/bin/sh\n"
        f"{MARKER} (written by `eventcoord hook install`): the publish gate.\n"
        "# Runs `eventcoord verify-hold` with git config eventcoord.session, eventcoord.issue and\n"
        "# eventcoord.fencingToken; refuses the push when the service says you no longer hold it.\n"
        f'if [ -x {python} ]; then exec {python} -m eventcoord.cli hook pre-push "$@"; fi\n'
        'exec eventcoord hook pre-push "$@"\n'
    )


def cmd_install(args: argparse.Namespace) -> int:
    """Write the pre-push hook into the repository at ``--repo`` (default: here)."""
    repo = Path(args.repo or ".")
    found = git("rev-parse", "--git-path", "hooks", cwd=repo)
    if found.returncode != 0:
        print(f"hook install: {repo} is not a git repository", file=sys.stderr)
        return EXIT_USAGE
    hooks = (repo / found.stdout.strip()).resolve()
    hooks.mkdir(parents=True, exist_ok=True)
    target = hooks / "pre-push"
    if target.exists() and MARKER not in target.read_text(errors="replace") and not args.force:
        print(f"hook install: {target} exists and is not eventcoord's; pass --force to replace it", file=sys.stderr)
        return EXIT_USAGE
    target.write_text(hook_script())
    target.chmod(0o755)
    print(f"installed {target}")
    return EXIT_OK


def cmd_pre_push(args: argparse.Namespace) -> int:
    """Run by the hook: verify the recorded hold; 1 refuses the push."""
    from eventcoord.cli import main

    session, issue, token = (git("config", "--get", key).stdout.strip() for key in KEYS)
    if not session or not issue:
        print(
            "eventcoord: warning: no hold recorded for this repository (git config eventcoord.session / "
            "eventcoord.issue); pushing without the publish gate",
            file=sys.stderr,
        )
        return EXIT_OK
    argv = ["verify-hold", "--session-id", session, "--issue", issue, *(["--fencing-token", token] if token else [])]
    code = main(argv)
    if code == EXIT_OK:
        print(f"eventcoord: hold on {issue} verified", file=sys.stderr)
        return EXIT_OK
    if code == EXIT_REFUSED:
        print(
            f"eventcoord: push refused: session {session} no longer holds {issue}; do not publish this work",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    from eventcoord.client.locate import locate

    where = locate(server_url(None)).url
    print(
        f"eventcoord: warning: could not verify the hold on {issue} at {where} (exit {code}); pushing anyway",
        file=sys.stderr,
    )
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``hook install`` and ``hook pre-push``."""
    hook = sub.add_parser("hook", help="the git pre-push hook (the publish gate)")
    hook_sub = hook.add_subparsers(dest="hook_command", required=True)
    install = hook_sub.add_parser("install", help="write the pre-push hook into a repository")
    install.add_argument("--repo", help="the repository (default: the current directory)")
    install.add_argument("--force", action="store_true", help="replace a pre-push hook that is not eventcoord's")
    install.set_defaults(fn=cmd_install)
    pre_push = hook_sub.add_parser("pre-push", help="what the hook runs: verify the hold recorded in git config")
    pre_push.add_argument("remote", nargs="?")
    pre_push.add_argument("remote_url", nargs="?")
    pre_push.set_defaults(fn=cmd_pre_push)
