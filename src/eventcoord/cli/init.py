"""``eventcoord init``: one command sets a repository up so every agent session in it is coordinated.

It writes, merging into what is already there, the Claude Code hooks (``.claude/settings.json``),
the Codex hooks (``.codex/hooks.json``), the MCP server (``.mcp.json``) and the git
``pre-commit`` and ``pre-push`` hooks. Everything that is not eventcoord's is kept, a second
run changes nothing, ``--check`` says what is missing and ``--remove`` takes out exactly
eventcoord's own entries. Nothing is written unless every file could be read.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

EXIT_DONE, EXIT_MISSING, EXIT_ERROR = 0, 1, 2


@dataclass
class Plan:
    """One file: its text before and after (None: absent), and what was not in place."""

    path: Path
    shown: str
    what: str
    before: str | None
    after: str | None
    missing: list[str] = field(default_factory=list)
    made_executable: bool = False

    @property
    def action(self) -> str:
        if self.before == self.after:
            return "updated" if self.made_executable else "unchanged"
        if self.after is None:
            return "deleted"
        return "created" if self.before is None else "updated"


def _repository(start: Path) -> Path:
    """The top of the work tree ``start`` is in."""
    import subprocess

    from eventcoord.cli.setup_files import SetupError

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=start, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SetupError(f"{start} is not inside a git repository (git: {done.stderr.strip()})")
        return done.stdout.strip()

    if not start.is_dir():
        raise SetupError(f"{start} is not a directory")
    return Path(git("rev-parse", "--show-toplevel"))


def _read(path: Path) -> str | None:
    from eventcoord.cli.setup_files import SetupError

    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise SetupError(f"{path}: cannot be read ({e})") from None


def plans(repo: Path, executable: str, remove: bool) -> tuple[Path, list[Plan]]:
    """The work tree's top and what each agent set-up file becomes there; raises
    ``SetupError`` (before anything is written) on a file it cannot read or merge."""
    from eventcoord.cli import setup_files

    top = _repository(repo)
    words = shlex.split(executable)

    def shown(path: Path) -> str:
        return str(path.relative_to(top)) if path.is_relative_to(top) else str(path)

    out: list[Plan] = []
    for harness, rel, what in (
        ("claude", ".claude/settings.json", "Claude Code hooks"),
        ("codex", ".codex/hooks.json", "Codex hooks"),
    ):
        path = top / rel
        before = _read(path)
        after, missing = setup_files.harness_hooks(shown(path), before, harness, words, remove)
        out.append(Plan(path, shown(path), what, before, after, missing))
    path = top / ".mcp.json"
    before = _read(path)
    after, missing = setup_files.mcp_server(shown(path), before, words, remove)
    out.append(Plan(path, shown(path), "MCP server `eventcoord`", before, after, missing))
    return top, out


def _write(plan: Plan) -> None:
    if plan.after is None:
        if plan.before is not None:
            plan.path.unlink()
            folder = plan.path.parent  # .claude/ or .codex/, when nothing else is in it
            if folder.name in (".claude", ".codex") and not any(folder.iterdir()):
                folder.rmdir()
        return
    if plan.after != plan.before:
        plan.path.parent.mkdir(parents=True, exist_ok=True)
        plan.path.write_text(plan.after, encoding="utf-8")


def git_hooks(top: Path, executable: str, remove: bool) -> list[Plan]:
    """Add (or take out) the commit and publish gates in the git hooks, as ``hook install``
    does, and say what each hook file became."""
    from eventcoord.cli import hook

    folder = hook.hooks_dir(top)
    before = {name: (_read(folder / name), os.access(folder / name, os.X_OK)) for name in hook.GIT_HOOKS}
    if remove:
        hook.remove_git_hooks(top)
    else:
        hook.write_git_hooks(top, executable)
    rows = []
    for name, (text, was_executable) in before.items():
        path = folder / name
        shown = str(path.relative_to(top)) if path.is_relative_to(top) else str(path)
        after = _read(path)
        made_executable = after is not None and not was_executable and os.access(path, os.X_OK)
        what = "git hook: " + hook.GIT_HOOKS[name].split(":")[0]
        rows.append(Plan(path, shown, what, text, after, made_executable=made_executable))
    return rows


def _where(executable: str) -> str:
    """Where the hooks' ``eventcoord`` comes from, or a warning when the harness will not find it."""
    first = shlex.split(executable)[0]
    found = shutil.which(first)
    if found is None:
        return (
            f"WARNING: `{first}` is not on PATH here, so the hooks cannot run it and every agent session goes "
            "uncoordinated (hooks fail open). Install eventcoord where the agents' PATH finds it (pipx install, "
            "uv tool install, or activate its virtualenv before starting the agent), or run init again with "
            "--executable /absolute/path/to/eventcoord (then the files name this machine's path: do not commit them)."
        )
    note = f"The hooks run `{first}` as found on the agent's PATH; here that is {found}."
    if not os.path.isabs(first):
        note += " Start agents with the same PATH (a harness started elsewhere may not find it)."
    return note


def _next_steps(executable: str) -> list[str]:
    return [
        "Codex: trust this project and its hooks. Codex SKIPS the hooks of an untrusted project, and hooks "
        "it has not been asked to trust, SILENTLY: no error, no coordination. Run `codex` here once, trust the "
        "folder, then choose 'Trust all and continue' when it says hooks need review (or review them with "
        "/hooks). Every change to .codex/hooks.json asks again. Unattended `codex exec` runs skip untrusted "
        "hooks too; pass --dangerously-bypass-hook-trust only where the hooks are vetted.",
        "Claude Code: loads .claude/settings.json once you trust the folder; approve the MCP server "
        "`eventcoord` from .mcp.json when it asks.",
        _where(executable),
        "The hooks find the server as every eventcoord client does: EVENTCOORD_URL and EVENTCOORD_TOKEN in the "
        "agent's environment, else http://127.0.0.1:8765 with the .eventcoord/admin-token of the agent's folder "
        "or a parent (start it with "
        "`eventcoord serve`). An unreachable server lets the agent go on (fail-open) with a warning.",
        "Commit .claude/settings.json, .codex/hooks.json and .mcp.json to share them; git hooks are per clone: "
        "run `eventcoord init` in each clone. Undo: `eventcoord init --remove`.",
    ]


def run(args: argparse.Namespace) -> int:
    """``eventcoord init [--repo DIR] [--check | --remove]``; exit 0 done, 1 missing (--check), 2 error."""
    from eventcoord.cli.setup_files import SetupError

    try:
        if not shlex.split(args.executable):
            raise ValueError("empty")
    except ValueError as e:
        print(f"eventcoord init: --executable {args.executable!r} is not a command ({e})", file=sys.stderr)
        return EXIT_ERROR
    from eventcoord.cli.hook import missing_git_hooks

    try:
        top, planned = plans(Path(args.repo or "."), args.executable, args.remove)
        # Also reads the git hooks, so one it cannot merge stops init before anything is written.
        git_missing = [] if args.remove else missing_git_hooks(top, args.executable)
    except SetupError as e:
        print(f"eventcoord init: {e}", file=sys.stderr)
        print("eventcoord init: nothing was written", file=sys.stderr)
        return EXIT_ERROR
    if args.check:
        missing = [m for plan in planned for m in plan.missing] + git_missing
        if not missing:
            print("eventcoord init --check: everything is in place")
            return EXIT_DONE
        print("eventcoord init --check: missing:")
        for m in missing:
            print(f"  {m}")
        print("run `eventcoord init` to put them in place")
        return EXIT_MISSING
    for plan in planned:
        _write(plan)
    planned += git_hooks(top, args.executable, args.remove)
    width = max(len(p.shown) for p in planned)
    verb = "removed from" if args.remove else "wrote"
    print(f"eventcoord init{' --remove' if args.remove else ''}: {verb} {top}")
    for plan in planned:
        print(f"  {plan.action:<9} {plan.shown:<{width}}  {plan.what}")
    if not args.remove:
        import textwrap

        print("\nStill to do:")
        for step in _next_steps(args.executable):
            print(
                textwrap.fill(
                    step,
                    100,
                    initial_indent="  - ",
                    subsequent_indent="    ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )
    return EXIT_DONE


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``init``."""
    p = sub.add_parser(
        "init",
        help="set a git repository up for coordinated agents (harness hooks, MCP, git hooks)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--repo", help="the repository (default: the current directory)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="write nothing; exit 1 naming what is missing")
    mode.add_argument("--remove", action="store_true", help="take out exactly eventcoord's own entries")
    p.add_argument(
        "--executable",
        default="eventcoord",
        help="how the hooks name eventcoord (default: `eventcoord`, found on the agent's PATH; an absolute "
        "path works only on this machine)",
    )
    p.set_defaults(fn=run)
