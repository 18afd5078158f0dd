"""The gates in git, and the ``hook`` subcommands: install, pre-commit, pre-push, claude, codex.

``claim-issue … --record`` (``cli.gate``) writes the grant and the server that granted it
into the repository's git config (``eventcoord.session``, ``.issue``, ``.fencingToken``,
``.url``: a push from an IDE, with no ``--url`` nor ``EVENTCOORD_URL``, checks the right
server). ``hook install`` (and ``eventcoord init``, through ``write_git_hooks``) adds two git
hooks: ``pre-push`` runs ``verify-hold`` and refuses the push only when the service refuses
it (no recorded hold, or no server, passes with a warning); ``pre-commit`` runs the commit
gate (``cli.commit_gate``). ``hook claude|codex`` is the coding-agent hook (``cli.harness_hook``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eventcoord.cli.exchange import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from eventcoord.cli.gate import KEYS, git, server_url

# --- the git hooks: pre-commit (the commit gate) and pre-push (the publish gate) -------------

#: The git hooks eventcoord adds its gate to, and what each gate does.
GIT_HOOKS = {
    "pre-commit": "the commit gate: refuses a commit of files another live session has claimed",
    "pre-push": "the publish gate: refuses a push once the recorded hold on the issue is gone",
}


def hooks_dir(repo: Path) -> Path:
    """The folder git runs ``repo``'s hooks from (``core.hooksPath`` honoured; shared by worktrees).

    Raises ``SetupError`` outside a git repository.
    """
    from eventcoord.cli.setup_files import SetupError

    found = git("rev-parse", "--git-path", "hooks", cwd=repo)
    if found.returncode != 0:
        raise SetupError(f"{repo} is not in a git repository")
    return (repo / found.stdout.strip()).resolve()


def _planned(repo: Path, remove: bool, executable: str) -> list[tuple[Path, str | None, str | None, list[str]]]:
    """Each git hook: its path, text now, text after, and what of eventcoord's is not in place."""
    import shlex

    from eventcoord.cli import setup_files

    folder = hooks_dir(repo)
    out = []
    for name in GIT_HOOKS:
        path = folder / name
        try:
            before = path.read_text(encoding="utf-8") if path.exists() else None
        except (OSError, UnicodeDecodeError) as e:
            raise setup_files.SetupError(f"{path}: cannot be read ({e})") from None
        after, missing = setup_files.git_hook(str(path), before, name, shlex.split(executable), remove)
        if after is not None and path.exists() and not path.stat().st_mode & 0o100:
            missing.append(f"{path}: not executable")
        out.append((path, before, after, missing))
    return out


def write_git_hooks(repo: Path, executable: str = "eventcoord") -> list[str]:
    """Add the commit gate (``pre-commit``) and the publish gate (``pre-push``) to ``repo``'s git hooks.

    The gate goes right after a shell hook's ``#!`` line, so it runs before the hook's own
    lines, which are kept as they were; a second run changes nothing. ``executable`` is how
    the hook names eventcoord when this installation is gone. Returns one line per hook
    written (none: both were in place). Raises ``SetupError`` before writing anything when
    ``repo`` is not a git repository or a hook is not a shell script.
    """
    done = []
    for path, before, after, _ in _planned(repo, False, executable):
        assert after is not None
        if after != before:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(after, encoding="utf-8")
            done.append(f"{'wrote' if before is None else 'added the gate to'} {path}")
        if path.stat().st_mode & 0o111 != 0o111:
            path.chmod(path.stat().st_mode | 0o111)
    return done


def remove_git_hooks(repo: Path) -> list[str]:
    """Take eventcoord's gates out of ``repo``'s git hooks, leaving the repository's own lines.

    A hook left with nothing but its ``#!`` line is deleted. Returns one line per hook changed.
    """
    done = []
    for path, before, after, _ in _planned(repo, True, "eventcoord"):
        if after == before:
            continue
        if after is None:
            path.unlink()
            done.append(f"removed {path}")
        else:
            path.write_text(after, encoding="utf-8")
            done.append(f"took the gate out of {path}")
    return done


def missing_git_hooks(repo: Path, executable: str = "eventcoord") -> list[str]:
    """What ``write_git_hooks`` would still do in ``repo``: one line per gate not (fully) in place."""
    return [m for *_, missing in _planned(repo, False, executable) for m in missing]


# --- the subcommands -----------------------------------------------------------------------


def cmd_install(args: argparse.Namespace) -> int:
    """Add (``--remove``: take out) the commit and publish gates in the repository at ``--repo``."""
    from eventcoord.cli.setup_files import SetupError

    repo = Path(args.repo or ".")
    try:
        done = remove_git_hooks(repo) if args.remove else write_git_hooks(repo)
    except SetupError as e:
        print(f"hook install: {e}; nothing was written", file=sys.stderr)
        return EXIT_USAGE
    for line in done or ["nothing to do: " + ("no gate installed" if args.remove else "both gates are in place")]:
        print(line)
    return EXIT_OK


def cmd_pre_push(args: argparse.Namespace) -> int:
    """Run by the hook: verify the recorded hold; 1 refuses the push."""
    from eventcoord.cli import ops

    session, issue, token = (git("config", "--get", key).stdout.strip() for key in KEYS)
    if not session or not issue:
        print(
            "eventcoord: warning: no hold recorded for this repository (git config eventcoord.session / "
            "eventcoord.issue); pushing without the publish gate",
            file=sys.stderr,
        )
        return EXIT_OK
    argv = ["verify-hold", "--session-id", session, "--issue", issue, *(["--fencing-token", token] if token else [])]
    code = ops.main(argv)
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
