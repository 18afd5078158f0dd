#!/usr/bin/env python3
"""A stand-in for the ``gh`` command line: GitHub issues kept in a JSON file.

It accepts ONLY the calls the GitHub mirror may make — ``gh issue list --repo R --state open
--json number,labels,assignees --limit 1000 [--label L]``, ``gh issue edit N --repo R
[--add-label L] [--remove-label L] [--add-assignee A] [--remove-assignee A]`` and ``gh issue
comment N --repo R --body TEXT`` — and answers them as ``gh`` does (its output shapes, its
error messages, its exit codes). Any other call exits 99 with a loud message and is recorded
in ``refused``, so a test that checks ``refused == []`` fails. The state can say that ``gh`` is
not logged in, and that the Nth write fails. GitHub is a service this machine cannot reach;
everything on eventcoord's side of the mirror is real.

The state file is ``$FAKE_GH_STATE``; ``FakeGitHub`` is how tests read and change it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

NOT_LOGGED_IN = (
    "To get started with GitHub CLI, please run:  gh auth login\n"
    "Alternatively, populate the GH_TOKEN environment variable with a GitHub API authentication token."
)
WRITE_FLAGS = ("--add-label", "--remove-label", "--add-assignee", "--remove-assignee")


class FakeGitHub:
    """The stand-in's state file: issues per repository, what was called, what was refused."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def create(self, repo: str, labels: list[str] | None = None) -> None:
        """A fresh state with one repository (and its labels: WIP and ai-dev-queued by default)."""
        state = {
            "logged_in": True,
            "repos": {repo: {"labels": labels or ["WIP", "ai-dev-queued", "bug"], "issues": {}}},
            "fail_write": None,
            "writes": 0,
            "calls": [],
            "refused": [],
        }
        self.path.write_text(json.dumps(state))

    @contextlib.contextmanager
    def editing(self) -> Iterator[dict[str, Any]]:
        """The state, locked; written back when the block ends."""
        with _locked(self.path) as state:
            yield state

    def read(self) -> dict[str, Any]:
        with _locked(self.path) as state:
            return state

    def add_issue(
        self, repo: str, number: int, labels: list[str] | None = None, assignees: list[str] | None = None
    ) -> None:
        with self.editing() as s:
            s["repos"][repo]["issues"][str(number)] = {
                "state": "open",
                "labels": list(labels or []),
                "assignees": list(assignees or []),
                "comments": [],
            }

    def issue(self, repo: str, number: int) -> dict[str, Any]:
        issue: dict[str, Any] = self.read()["repos"][repo]["issues"][str(number)]
        return issue

    def set(self, repo: str, number: int, **fields: Any) -> None:
        """Change an issue as a person would on github.com."""
        with self.editing() as s:
            s["repos"][repo]["issues"][str(number)].update(fields)

    def writes(self) -> list[list[str]]:
        """Every write call accepted (edit and comment), in order."""
        return [c for c in self.read()["calls"] if c[2] in ("edit", "comment")]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[dict[str, Any]]:
    with open(str(path) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state: dict[str, Any] = json.loads(path.read_text())
        before = json.dumps(state, sort_keys=True)
        yield state
        if json.dumps(state, sort_keys=True) != before:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(state))
            tmp.replace(path)


class Refused(Exception):
    """A call the mirror may not make."""


def _options(args: list[str], single: set[str], repeated: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``--flag value`` pairs; each single flag at most once; anything else is refused."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        flag = args[i]
        if i + 1 >= len(args) or (flag not in single and flag not in repeated):
            raise Refused(f"unexpected argument {flag!r}")
        value = args[i + 1]
        if flag in single:
            if flag in out:
                raise Refused(f"{flag} given twice")
            out[flag] = value
        else:
            out.setdefault(flag, []).append(value)
        i += 2
    return out


def _issue_number(text: str) -> int:
    if not text.isdigit():
        raise Refused(f"not an issue number: {text!r}")
    return int(text)


def _repo(state: dict[str, Any], name: str) -> dict[str, Any] | None:
    for repo, data in state["repos"].items():
        if repo.lower() == name.lower():
            found: dict[str, Any] = data
            return found
    return None


class Answer(Exception):
    def __init__(self, code: int, out: str = "", err: str = "") -> None:
        self.code, self.out, self.err = code, out, err


def _no_repo(name: str) -> Answer:
    return Answer(1, err=f"GraphQL: Could not resolve to a Repository with the name '{name}'. (repository)")


def _list(state: dict[str, Any], args: list[str]) -> Answer:
    opts = _options(args, {"--repo", "--state", "--json", "--limit", "--label"})
    if opts.get("--state") != "open" or opts.get("--json") != "number,labels,assignees" or "--repo" not in opts:
        raise Refused("issue list must be --repo R --state open --json number,labels,assignees --limit 1000")
    if opts.get("--limit") != "1000":
        raise Refused("issue list must be --limit 1000")
    repo = _repo(state, opts["--repo"])
    if repo is None:
        return _no_repo(opts["--repo"])
    issues = [
        {
            "assignees": [{"id": f"U_{a}", "login": a, "name": ""} for a in issue["assignees"]],
            "labels": [{"id": f"LA_{x}", "name": x, "description": "", "color": "ededed"} for x in issue["labels"]],
            "number": int(number),
        }
        for number, issue in repo["issues"].items()
        if issue["state"] == "open" and ("--label" not in opts or opts["--label"] in issue["labels"])
    ]
    issues.sort(key=lambda i: -i["number"])
    return Answer(0, out=json.dumps(issues[:1000]) + "\n")


def _write(state: dict[str, Any], verb: str, args: list[str]) -> Answer:
    if not args:
        raise Refused(f"issue {verb} needs an issue number")
    number = _issue_number(args[0])
    if verb == "edit":
        opts = _options(args[1:], {"--repo"}, frozenset(WRITE_FLAGS))
        if not any(f in opts for f in WRITE_FLAGS):
            raise Refused("issue edit with nothing to change")
    else:
        opts = _options(args[1:], {"--repo", "--body"})
        if "--body" not in opts:
            raise Refused("issue comment needs --body")
    if "--repo" not in opts:
        raise Refused(f"issue {verb} needs --repo")
    state["writes"] += 1
    if state.get("fail_write") == state["writes"]:
        return Answer(1, err=f"HTTP 502: Server Error (write {state['writes']} fails, as the test asked)")
    repo = _repo(state, opts["--repo"])
    if repo is None:
        return _no_repo(opts["--repo"])
    issue = repo["issues"].get(str(number))
    if issue is None:
        return Answer(
            1,
            err=f"GraphQL: Could not resolve to an issue or pull request with the number of {number}. "
            "(repository.issue)",
        )
    url = f"https://github.com/{opts['--repo']}/issues/{number}"
    if verb == "comment":
        issue["comments"].append(opts["--body"])
        return Answer(0, out=f"{url}#issuecomment-{len(issue['comments'])}\n")
    for label in opts.get("--add-label", []):
        if label not in repo["labels"]:
            return Answer(1, err=f"failed to update {url}: '{label}' not found")
    for label in opts.get("--add-label", []):
        if label not in issue["labels"]:
            issue["labels"].append(label)
    for login in opts.get("--add-assignee", []):
        if login not in issue["assignees"]:
            issue["assignees"].append(login)
    issue["labels"] = [x for x in issue["labels"] if x not in opts.get("--remove-label", [])]
    issue["assignees"] = [a for a in issue["assignees"] if a not in opts.get("--remove-assignee", [])]
    return Answer(0, out=url + "\n")


def main(argv: list[str]) -> int:
    path = Path(os.environ["FAKE_GH_STATE"])
    with _locked(path) as state:
        try:
            if not state.get("logged_in", True):
                raise Answer(4, err=NOT_LOGGED_IN)
            if argv[:2] == ["issue", "list"]:
                answer = _list(state, argv[2:])
            elif argv[:2] in (["issue", "edit"], ["issue", "comment"]):
                answer = _write(state, argv[1], argv[2:])
            else:
                raise Refused("not an issue list, edit or comment")
        except Answer as a:
            answer = a
        except Refused as e:
            state["refused"].append(["gh", *argv])
            answer = Answer(99, err=f"fake gh: REFUSED a call the GitHub mirror may not make ({e}): gh {argv}")
        if answer.code == 0:
            state["calls"].append(["gh", *argv])
    sys.stdout.write(answer.out)
    sys.stderr.write(answer.err + ("\n" if answer.err else ""))
    return answer.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
