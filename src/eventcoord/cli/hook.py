"""The gates in git, and the ``hook`` subcommands: verify-hold, --record, pre-commit, pre-push.

``claim-issue … --record`` writes the grant into the repository's git config
(``eventcoord.session``, ``eventcoord.issue``, ``eventcoord.fencingToken``). ``hook install``
(and ``eventcoord init``, through ``write_git_hooks``) adds two gates to the repository's own
git hooks: ``pre-push`` runs ``verify-hold`` with that hold and refuses the push only when
the service refuses it (``NOT_FRESH_HOLDER`` names the current holder; no recorded hold, or
no server, passes with a warning); ``pre-commit`` runs the commit gate (``cli.commit_gate``).
``hook claude|codex`` is the coding-agent hook (``cli.harness_hook``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eventcoord.cli.ops import EXIT_OK, EXIT_REFUSED, EXIT_USAGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import Any

    from eventcoord.cli.ops import Answer, Refusal, Server

KEYS = ("eventcoord.session", "eventcoord.issue", "eventcoord.fencingToken")


def git(*args: str, cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run git, capturing its output."""
    import subprocess

    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def _in_repository() -> bool:
    return git("rev-parse", "--git-dir").returncode == 0


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
        result = answer.payload()["result"]
        for key, value in zip(KEYS, (values["session_id"], result["issue"], result["fencing_token"]), strict=True):
            git("config", key, str(value))
        print(
            f"recorded in git config: {KEYS[0]}={values['session_id']} {KEYS[1]}={result['issue']} "
            f"{KEYS[2]}={result['fencing_token']}",
            file=sys.stderr,
        )
        return EXIT_OK

    p.set_defaults(_before=before, _after=after)


# --- verify-hold: name the current holder ------------------------------------------------


def name_holder(p: argparse.ArgumentParser) -> None:
    """``verify-hold``: a ``NOT_FRESH_HOLDER`` refusal names the current holder."""

    def on_refused(args: argparse.Namespace, refused: Refusal, server: Server) -> dict[str, Any]:
        if refused.code != "NOT_FRESH_HOLDER":
            return {}
        from eventcoord.cli.ops import Unreachable, read_path
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

    p.set_defaults(_on_refused=on_refused)


# --- the git hooks: pre-commit (the commit gate) and pre-push (the publish gate) -------------

#: The git hooks eventcoord writes, and what each one's block does.
GIT_HOOKS = {
    "pre-commit": "the commit gate: refuses a commit of files another live session has claimed",
    "pre-push": "the publish gate: refuses a push once the recorded hold on the issue is gone",
}
#: The whole-file pre-push hook that `hook install` wrote before hooks were merged.
LEGACY_MARKER = "# eventcoord pre-push hook"
#: Where a hook in another language than the shell goes; eventcoord's hook runs it after the gate.
CHAINED_SUFFIX = ".before-eventcoord"
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})


class NotARepository(Exception):
    """The folder is not inside a git repository."""


def hooks_dir(repo: Path) -> Path:
    """The folder git runs ``repo``'s hooks from (``core.hooksPath`` honoured; shared by worktrees)."""
    found = git("rev-parse", "--git-path", "hooks", cwd=repo)
    if found.returncode != 0:
        raise NotARepository(f"{repo} is not in a git repository")
    return (repo / found.stdout.strip()).resolve()


def _begin(name: str) -> str:
    return f"# >>> eventcoord {name} >>>"


def _end(name: str) -> str:
    return f"# <<< eventcoord {name} <<<"


def hook_block(name: str, chained: bool = False) -> str:
    """eventcoord's lines in the git hook ``name``: run this installation's gate, else the one on PATH.

    ``chained``: the block ends by running the repository's own hook, kept beside it with
    ``CHAINED_SUFFIX`` (a hook written in another language than the shell).
    """
    import shlex

    python = shlex.quote(sys.executable)
    # pre-push: git's list of refs on stdin is left for the repository's own hook.
    call = f'hook {name} "$@"' + (" </dev/null" if name == "pre-push" else "")
    lines = [
        _begin(name),
        f"# {GIT_HOOKS[name]}. Written by eventcoord; `eventcoord init --remove` takes it out.",
        f"if [ -x {python} ]; then {python} -m eventcoord.cli {call} || exit $?",
        f"elif command -v eventcoord >/dev/null 2>&1; then eventcoord {call} || exit $?",
        f'else echo "eventcoord: warning: eventcoord is not installed; {name} gate skipped" >&2; fi',
    ]
    if chained:
        lines.append(f'exec "$(dirname "$0")/{name}{CHAINED_SUFFIX}" "$@"')
    lines.append(_end(name))
    return "\n".join(lines) + "\n"


def _is_shell(text: str) -> bool:
    """Whether git runs ``text`` with a shell: a shell's ``#!`` line, or none (git falls back to sh)."""
    if not text.startswith("#!"):
        return True
    words = text[2:].split("\n", 1)[0].split()
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return bool(words) and Path(words[0]).name in _SHELLS


def _without_block(text: str, name: str) -> str | None:
    """``text`` with eventcoord's block taken out; None when it has none."""
    begin, end = _begin(name), _end(name)
    if begin not in text or end not in text:
        return None
    head, _, rest = text.partition(begin + "\n")
    _, _, tail = rest.partition(end)
    return head + tail.removeprefix("\n")


def _merged(text: str | None, name: str) -> str:
    """The shell hook ``name`` with eventcoord's current block, whatever else it holds kept as it was."""
    block = hook_block(name)
    if text is None or (name == "pre-push" and LEGACY_MARKER in text and _begin(name) not in text):
        return "#!/bin/sh\n" + block
    if _without_block(text, name) is not None:  # ours already: the current block where the old one was
        head, _, rest = text.partition(_begin(name) + "\n")
        return head + block + rest.partition(_end(name))[2].removeprefix("\n")
    first, newline, body = text.partition("\n")
    if first.startswith("#!"):
        return first + newline + block + body
    return block + text


def write_git_hooks(repo: Path) -> list[str]:
    """Add the commit gate (``pre-commit``) and the publish gate (``pre-push``) to ``repo``'s git hooks.

    Merges into hooks that are already there: the repository's own lines are kept and run
    after the gate (a shell hook gets eventcoord's block after its ``#!`` line; a hook in
    another language is kept as ``<name>.before-eventcoord`` and run by eventcoord's).
    Running it again changes nothing. Returns one line per hook it changed (none: all was
    in place). Raises ``NotARepository``.
    """
    folder = hooks_dir(repo)
    folder.mkdir(parents=True, exist_ok=True)
    done = []
    for name in GIT_HOOKS:
        target, kept = folder / name, folder / (name + CHAINED_SUFFIX)
        text = target.read_text(errors="surrogateescape") if target.exists() else None
        if kept.exists():
            new, what = "#!/bin/sh\n" + hook_block(name, chained=True), f"wrote {target}"
        elif text is not None and not _is_shell(text) and _without_block(text, name) is None:
            target.rename(kept)  # another language: kept whole, and run by ours after the gate
            new, what = "#!/bin/sh\n" + hook_block(name, chained=True), f"wrote {target} (yours kept as {kept.name})"
            text = None
        else:
            new = _merged(text, name)
            what = (
                f"wrote {target}"
                if text is None
                else f"updated the {name} gate in {target}"
                if _without_block(text, name) is not None
                else f"added the {name} gate to {target} (your lines kept)"
            )
        if new != text:
            target.write_text(new, errors="surrogateescape")
            done.append(what)
        mode = target.stat().st_mode
        if mode & 0o111 != 0o111:
            target.chmod(mode | 0o111)
    return done


def remove_git_hooks(repo: Path) -> list[str]:
    """Take eventcoord's blocks out of ``repo``'s git hooks, leaving what the repository had.

    A hook left with nothing but its ``#!`` line is deleted; a hook kept as
    ``<name>.before-eventcoord`` goes back in its place. Returns one line per hook changed.
    """
    folder = hooks_dir(repo)
    done = []
    for name in GIT_HOOKS:
        target, kept = folder / name, folder / (name + CHAINED_SUFFIX)
        if kept.exists():
            kept.replace(target)
            done.append(f"restored your {name} hook in {target}")
            continue
        if not target.exists():
            continue
        text = target.read_text(errors="surrogateescape")
        rest = _without_block(text, name)
        if rest is None and name == "pre-push" and LEGACY_MARKER in text:
            rest = ""
        if rest is None:
            continue
        if rest.strip() in ("", "#!/bin/sh"):
            target.unlink()
            done.append(f"removed {target}")
        else:
            target.write_text(rest, errors="surrogateescape")
            done.append(f"removed the {name} gate from {target} (your lines kept)")
    return done


def missing_git_hooks(repo: Path) -> list[str]:
    """What ``write_git_hooks`` would still add to ``repo``: one line per hook not (or not fully) in place."""
    folder = hooks_dir(repo)
    missing = []
    for name in GIT_HOOKS:
        target = folder / name
        text = target.read_text(errors="surrogateescape") if target.exists() else ""
        chained = (folder / (name + CHAINED_SUFFIX)).exists()
        if hook_block(name, chained) not in text or not target.stat().st_mode & 0o111:
            missing.append(f"the {name} gate in {target}")
    return missing


# --- the subcommands -----------------------------------------------------------------------


def cmd_install(args: argparse.Namespace) -> int:
    """Add (``--remove``: take out) the commit and publish gates in the repository at ``--repo``."""
    repo = Path(args.repo or ".")
    try:
        done = remove_git_hooks(repo) if args.remove else write_git_hooks(repo)
    except NotARepository as e:
        print(f"hook install: {e}", file=sys.stderr)
        return EXIT_USAGE
    for line in done or ["nothing to do: " + ("no gate installed" if args.remove else "both gates are in place")]:
        print(line)
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
    print(f"eventcoord: warning: could not verify the hold on {issue} (exit {code}); pushing anyway", file=sys.stderr)
    return EXIT_OK


def cmd_pre_commit(args: argparse.Namespace) -> int:
    """Run by the hook: refuse staged files another live session has claimed."""
    from eventcoord.cli import commit_gate

    return commit_gate.run(args.url, args.token)


def cmd_harness(args: argparse.Namespace) -> int:
    """``hook claude|codex`` as argparse reads it (the script's own fast path reads plain options itself)."""
    from eventcoord.cli import harness_hook

    return harness_hook.run(args.hook_command, args.url, args.token)


def _server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="server URL (EVENTCOORD_URL; default http://127.0.0.1:8765)")
    p.add_argument("--token", help="bearer token (EVENTCOORD_TOKEN; default ./.eventcoord/admin-token)")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``hook install``, ``hook pre-commit``, ``hook pre-push``, ``hook claude``, ``hook codex``."""
    hook = sub.add_parser("hook", help="git hooks (the commit and publish gates) and coding-agent hooks")
    hook_sub = hook.add_subparsers(dest="hook_command", required=True)
    install = hook_sub.add_parser("install", help="add the pre-commit and pre-push gates to a repository's git hooks")
    install.add_argument("--repo", help="the repository (default: the current directory)")
    install.add_argument("--remove", action="store_true", help="take eventcoord's lines out of the hooks again")
    install.set_defaults(fn=cmd_install)
    pre_commit = hook_sub.add_parser(
        "pre-commit", help="what the pre-commit hook runs: refuse staged files another live session claimed"
    )
    _server_options(pre_commit)
    pre_commit.set_defaults(fn=cmd_pre_commit)
    pre_push = hook_sub.add_parser("pre-push", help="what the hook runs: verify the hold recorded in git config")
    pre_push.add_argument("remote", nargs="?")
    pre_push.add_argument("remote_url", nargs="?")
    pre_push.set_defaults(fn=cmd_pre_push)
    for harness, product in (("claude", "Claude Code"), ("codex", "Codex CLI")):
        p = hook_sub.add_parser(
            harness,
            help=f"a {product} hook: its payload on stdin to the server, the answer on stdout",
            description=f"Reads a {product} hook payload on stdin, sends it to /v1/hooks/{harness} and prints "
            "the answer. Without a server (or a 5xx, or no answer in 2 s) it prints nothing and exits 0; "
            "EVENTCOORD_HOOK_FAIL=closed makes a file-writing PreToolUse exit 2 instead.",
        )
        _server_options(p)
        p.set_defaults(fn=cmd_harness)
