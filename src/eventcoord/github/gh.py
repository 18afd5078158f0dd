"""The ``gh`` command line, the mirror's only way to GitHub: the few calls it makes, as argv.

Reads: ``gh issue list --repo R --state open --json number,labels,assignees --limit 1000
[--label L]``. Writes: ``gh issue edit N --repo R [--add-label L] [--remove-label L]
[--add-assignee A] [--remove-assignee A]`` and ``gh issue comment N --repo R --body TEXT``.
Every call is an argv list (never a shell string); ``EVENTCOORD_GH`` names the program to
run instead of the ``gh`` on PATH.
"""

from __future__ import annotations

import os
import shlex
import subprocess

import msgspec

from eventcoord.github.model import GhComment, GhEdit, GitHubIssue
from eventcoord.github.names import QUEUED, WIP

LIMIT = 1000
#: How long one ``gh`` call may take before the sync gives up on it.
TIMEOUT_SECONDS = 120.0


class GhFailed(Exception):
    """A ``gh`` call failed; ``message`` is what ``gh`` said (its own words)."""

    def __init__(self, argv: list[str], message: str, returncode: int | None = None) -> None:
        super().__init__(message)
        self.argv = argv
        self.message = message
        self.returncode = returncode


class _Label(msgspec.Struct, frozen=True):
    name: str


class _Assignee(msgspec.Struct, frozen=True):
    login: str


class _Issue(msgspec.Struct, frozen=True):
    number: int
    labels: list[_Label] = []
    assignees: list[_Assignee] = []


_issues = msgspec.json.Decoder(list[_Issue])


def list_argv(repo: str, label: str | None = None) -> list[str]:
    """The read of the repository's open issues (with one label, if given)."""
    argv = ["gh", "issue", "list", "--repo", repo, "--state", "open"]
    argv += ["--json", "number,labels,assignees", "--limit", str(LIMIT)]
    return argv + (["--label", label] if label else [])


def write_argv(repo: str, step: GhEdit | GhComment) -> list[str]:
    """The ``gh`` call that makes a write step."""
    if isinstance(step, GhComment):
        return ["gh", "issue", "comment", str(step.number), "--repo", repo, "--body", step.body]
    argv = ["gh", "issue", "edit", str(step.number), "--repo", repo]
    for flag, values in (
        ("--add-label", step.add_labels),
        ("--remove-label", step.remove_labels),
        ("--add-assignee", step.add_assignees),
        ("--remove-assignee", step.remove_assignees),
    ):
        for value in values:
            argv += [flag, value]
    return argv


def program() -> list[str]:
    """What runs in place of ``gh``: ``EVENTCOORD_GH`` (split like a shell would), else ``gh``."""
    return shlex.split(os.environ.get("EVENTCOORD_GH") or "gh")


def run(argv: list[str]) -> str:
    """Run one ``gh`` call; its standard output, or GhFailed with what it said."""
    env = {**os.environ, "GH_PROMPT_DISABLED": "1", "NO_COLOR": "1"}
    try:
        done = subprocess.run(
            [*program(), *argv[1:]],
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT_SECONDS,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise GhFailed(argv, f"{program()[0]}: not found (install the GitHub CLI, or set EVENTCOORD_GH)") from None
    except subprocess.TimeoutExpired:
        raise GhFailed(argv, f"no answer after {TIMEOUT_SECONDS:.0f} s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        raise GhFailed(argv, said, done.returncode)
    return done.stdout


def parse_issues(argv: list[str], text: str) -> dict[int, GitHubIssue]:
    """``gh issue list --json number,labels,assignees`` output, by issue number."""
    try:
        found = _issues.decode(text)
    except msgspec.DecodeError as e:
        raise GhFailed(argv, f"gh printed something that is not the expected JSON: {e}") from None
    return {
        i.number: GitHubIssue(
            i.number, frozenset(label.name for label in i.labels), frozenset(a.login for a in i.assignees)
        )
        for i in found
    }


def open_issues(repo: str) -> dict[int, GitHubIssue]:
    """The repository's open issues; past the list's limit, every one with a mirrored label too."""
    argv = list_argv(repo)
    issues = parse_issues(argv, run(argv))
    if len(issues) >= LIMIT:
        for label in (WIP, QUEUED):
            argv = list_argv(repo, label)
            issues.update(parse_issues(argv, run(argv)))
    return issues
