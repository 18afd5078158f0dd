"""The pre-commit gate: a commit may not carry a file another live session has claimed exclusively.

The committer's session is ``EVENTCOORD_SESSION``; else, in a harness's session (Claude
Code's ``CLAUDE_CODE_SESSION_ID``, Codex's ``CODEX_THREAD_ID``), the session its hooks are
bound to; else git config ``eventcoord.session``. Each staged path (a rename is both its
paths) is matched against the workspace's live exclusive claims with their own pattern
rules. A match held by another session refuses the commit (exit 1), naming path, holder and
issue; the committer's own claims and unclaimed paths pass. With no committer known it only
warns (exit 0), and a server that cannot be asked lets the commit through with a warning.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from eventcoord.client.locate import locate
from eventcoord.client.oneshot import request

#: Seconds to wait for the server's list of claims before committing with a warning.
TIMEOUT_SECONDS = 10.0
#: The most claims one read returns (the route's own ceiling).
CLAIMS_LIMIT = 10000
SESSION_VARIABLE = "EVENTCOORD_SESSION"


#: The variables in which a harness tells the commands it runs its own session id (the
#: ``session_id`` of its hooks), by harness.
HARNESS_VARIABLES = (("claude", "CLAUDE_CODE_SESSION_ID"), ("codex", "CODEX_THREAD_ID"), ("codex", "CODEX_SESSION_ID"))


def committer_session(url: str = "", token: str = "") -> str:
    """``EVENTCOORD_SESSION``; else the session the hooks of the harness running this commit
    are bound to (asked of the server at ``url``); else git config ``eventcoord.session``;
    '' when none is known."""
    from_env = os.environ.get(SESSION_VARIABLE, "").strip()
    if from_env:
        return from_env
    if url:
        for harness, variable in HARNESS_VARIABLES:
            harness_session = os.environ.get(variable, "").strip()
            if harness_session:
                bound = harness_bound_session(url, token, harness, harness_session)
                if bound:
                    return bound
    done = subprocess.run(["git", "config", "--get", "eventcoord.session"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def harness_bound_session(url: str, token: str, harness: str, harness_session: str) -> str:
    """The eventcoord session ``harness``'s session is bound to; '' when none is (or the
    server cannot say: the read of the claims then warns)."""
    import json
    from urllib.parse import quote

    try:
        status, body = request(
            "GET",
            f"{url}/v1/hooks/{harness}/session?id={quote(harness_session, safe='')}",
            token,
            timeout=TIMEOUT_SECONDS,
        )
        found = json.loads(body).get("session_id") if status == 200 else None
    except (OSError, ValueError, AttributeError):
        return ""
    return found if isinstance(found, str) else ""


def staged_paths() -> list[str]:
    """Every path the commit being made touches, relative to the top of the work tree."""
    done = subprocess.run(
        ["git", "diff", "--cached", "--name-only", "--no-renames", "-z"], capture_output=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode(errors="replace").strip() or "git diff --cached failed")
    return [p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def blocking_claims(claims: list[dict[str, Any]], paths: list[str], session: str) -> list[tuple[str, dict[str, Any]]]:
    """``(path, claim)`` for each staged path under a live exclusive claim of another session."""
    from eventcoord.domain.paths import PathError, matches

    held = [
        c
        for c in claims
        if c.get("exclusive", True) and c.get("live", True) and (not session or c.get("session_id") != session)
    ]
    found = []
    for path in paths:
        for claim in held:
            try:
                hit = matches(str(claim["path"]), path)
            except PathError:  # the service stores only valid patterns; never stop a commit on one
                continue
            if hit:
                found.append((path, claim))
                break
    return found


def describe(path: str, claim: dict[str, Any]) -> str:
    """One line: the path, the claim that covers it, its holder and issue."""
    holder = claim.get("actor_key") or "an unattached claim"
    sid = claim.get("session_id")
    covered = "" if claim["path"] == path else f" (claim {claim['path']})"
    return f"  {path}{covered}: held by {holder}{f' (session {sid})' if sid else ''} for issue {claim['issue']}"


def run(url: str | None = None, token: str | None = None) -> int:
    """Check the commit being made; the exit code for git (1 refuses it)."""
    try:
        paths = staged_paths()
    except RuntimeError as e:
        print(f"eventcoord: warning: cannot list the staged paths ({e}); committing without the gate", file=sys.stderr)
        return 0
    if not paths:
        return 0
    target = locate(url, token)
    session = committer_session(target.url, target.token)
    claims = _live_claims(target.url, target.token)
    if claims is None:
        return 0
    found = blocking_claims(claims, paths, session)
    if not found:
        return 0
    print(
        f"eventcoord: {len(found)} staged path{'s are' if len(found) > 1 else ' is'} claimed by another live session:",
        file=sys.stderr,
    )
    for path, claim in found:
        print(describe(path, claim), file=sys.stderr)
    if not session:
        print(
            f"eventcoord: warning: committing anyway, as no session of yours is known (set {SESSION_VARIABLE} "
            "or git config eventcoord.session to have these commits refused)",
            file=sys.stderr,
        )
        return 0
    print(
        "eventcoord: commit refused: unstage these paths (git restore --staged PATH), wait for the holder to "
        "release them, or message the holder (eventcoord post-message --channel agent:SESSION --body ...)",
        file=sys.stderr,
    )
    return 1


def _live_claims(url: str, token: str) -> list[dict[str, Any]] | None:
    """The workspace's unreleased file claims; None (after a warning) when the server cannot say."""
    import json

    try:
        status, body = request("GET", f"{url}/v1/file-claims?limit={CLAIMS_LIMIT}", token, timeout=TIMEOUT_SECONDS)
    except (OSError, ValueError) as e:
        print(
            f"eventcoord: warning: cannot reach the eventcoord server at {url} ({e}); committing without the gate",
            file=sys.stderr,
        )
        return None
    try:
        claims = json.loads(body)["file_claims"] if status == 200 else None
    except (ValueError, KeyError, TypeError):
        claims = None
    if not isinstance(claims, list):
        print(
            f"eventcoord: warning: the eventcoord server at {url} did not list the file claims (HTTP {status}: "
            f"{' '.join(body[:200].decode('utf-8', 'replace').split())}); committing without the gate",
            file=sys.stderr,
        )
        return None
    return claims
