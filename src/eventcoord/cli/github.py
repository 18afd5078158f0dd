"""``eventcoord github sync``: the GitHub mirror, a client of a running server and of ``gh``.

Exit codes: 0 done; 1 a ``gh`` call failed (its own message on stderr), a step of the plan
failed (named), or the service refused; 2 usage (a bad ``--repo``, ``--project`` or logins
file); 3 server unreachable or 5xx; 4 401/403, or a token whose records would not count.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from eventcoord.cli.exchange import EXIT_DENIED, EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE

if TYPE_CHECKING:
    from eventcoord.github.runner import Mirror


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``github sync``."""
    github = sub.add_parser("github", help="mirror leases and the work queue onto GitHub issues (through gh)")
    github_sub = github.add_subparsers(dest="github_command", required=True)
    p = github_sub.add_parser(
        "sync",
        help="show leases and the queue as labels, assignees and comments; a person's WIP label as a human hold",
        description="Mirror eventcoord onto the issues of one GitHub repository through the gh command line: "
        "a live lease shows as label WIP (and its holder's login as an assignee), a queued item as ai-dev-queued, "
        "every takeover as one comment; an issue a person marks WIP becomes a human hold. See docs/github.md.",
    )
    p.add_argument("--repo", required=True, metavar="OWNER/NAME", help="the GitHub repository")
    p.add_argument("--project", help="mirror only this eventcoord project (and hold GitHub issue N as PROJECT-N)")
    p.add_argument("--logins", metavar="FILE", help="JSON object: actor keys (or actor names) to GitHub logins")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--render", action="store_true", help="print each gh write as a JSON argv line; run nothing")
    mode.add_argument("--apply", action="store_true", help="run the writes in order; stop at the first that fails")
    p.add_argument("--follow", action="store_true", help="keep syncing as events arrive (Server-Sent Events)")
    p.add_argument(
        "--interval",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="with --follow: also sync this often, for changes made on GitHub and sessions gone quiet (default 30)",
    )
    p.add_argument("--url", help="eventcoord server URL (EVENTCOORD_URL; default http://127.0.0.1:8765)")
    p.add_argument("--token", help="a human or admin token (EVENTCOORD_TOKEN; default ./.eventcoord/admin-token)")
    p.set_defaults(fn=sync)


def _usage(message: str) -> int:
    print(f"github sync: {message}", file=sys.stderr)
    return EXIT_USAGE


def sync(args: argparse.Namespace) -> int:
    """Check the options, then one sync (or follow); the exit code."""
    from eventcoord.client import Client, Unreachable
    from eventcoord.github.model import Scope
    from eventcoord.github.names import Logins, LoginsError, is_repo, parse_logins
    from eventcoord.github.runner import Mirror
    from eventcoord.sanitize import is_key

    if not is_repo(args.repo):
        return _usage(f"--repo: not OWNER/NAME: {args.repo!r}")
    if args.project is not None and not is_key(args.project):
        return _usage(f"--project: not a project key: {args.project!r}")
    if args.interval <= 0:
        return _usage("--interval: must be more than 0 seconds")
    logins = Logins()
    if args.logins:
        try:
            with open(args.logins, encoding="utf-8") as f:
                logins = parse_logins(f.read())
        except OSError as e:
            return _usage(f"--logins {args.logins}: cannot read it: {e.strerror}")
        except (LoginsError, UnicodeDecodeError) as e:
            return _usage(f"--logins {args.logins}: {e}")
    try:
        client = Client(args.url, args.token)
    except ValueError as e:
        return _usage(f"--url: {e}")
    with client:
        retry = args.interval if args.follow else 0.0
        mirror = Mirror(client, Scope(args.repo, args.project, logins), hold_retry=retry)
        try:
            if not args.follow:
                return _once(mirror, args.render)
            from eventcoord.github.follow import follow, head

            after = head(client)
            shown: list[str] = []
            code = _once(mirror, args.render, shown)
            if code != EXIT_OK:
                return code
            return follow(lambda: _once(mirror, args.render, shown, quiet=True), client, after, args.interval)
        except Unreachable as e:
            print(f"UNREACHABLE cannot reach the eventcoord server: {e}", file=sys.stderr)
            return EXIT_UNREACHABLE


def _once(mirror: Mirror, render: bool, shown: list[str] | None = None, quiet: bool = False) -> int:
    """One sync; its exit code. ``shown``: the ``gh`` writes rendered last; ``quiet``: print
    nothing for a sync with nothing to do, nor the same rendered writes again."""
    import json

    from eventcoord.cli.output import exit_code, fail
    from eventcoord.client import Refused, Unreachable
    from eventcoord.github.gh import GhFailed, write_argv
    from eventcoord.github.runner import StepFailed, UntrustedToken

    try:
        plan = mirror.plan()
        if render:
            lines = [json.dumps(write_argv(mirror.scope.repo, s)) for s in plan.gh_writes]
            if quiet and shown == lines:
                return EXIT_OK
            if shown is not None:
                shown[:] = lines
            tally = mirror.render(plan)
        else:
            tally = mirror.apply(plan)
    except GhFailed as e:
        print(e.message, file=sys.stderr)
        return EXIT_REFUSED
    except StepFailed as e:
        print(f"github sync {mirror.scope.repo}: {e}", file=sys.stderr)
        return EXIT_REFUSED
    except UntrustedToken as e:
        print(f"FORBIDDEN {e}", file=sys.stderr)
        return EXIT_DENIED
    except Refused as e:
        fail(e.code, e.message, e.details)
        return exit_code(e)
    except Unreachable as e:
        if not quiet:
            raise
        print(f"UNREACHABLE cannot reach the eventcoord server: {e} (trying again)", file=sys.stderr)
        return EXIT_UNREACHABLE
    if plan.steps or not quiet:
        mirror.summary(plan, tally, rendered=render)
    return EXIT_OK
