"""eventcoord's entries in a repository's agent and git set-up files, merged into the user's own.

Pure text in, text out: each function takes a file's current text (None: absent) and
returns its text with eventcoord's entries put in (or, with ``remove``, taken out) and
what was not in place. An entry is eventcoord's by its command (``… eventcoord hook
claude``), so a second run finds it wherever the user moved it; everything else is kept
as it was, in its order.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

#: The hook events eventcoord answers, in the order a session meets them.
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd")
#: The tools whose PreToolUse may write files (Codex also matches ``Edit|Write`` to apply_patch).
WRITE_TOOLS = {"claude": "Write|Edit|MultiEdit|NotebookEdit", "codex": "apply_patch|Edit|Write"}
#: How long a harness waits for the hook (it gives up on the server after 2 s itself). Said
#: outright because Claude Code otherwise gives SessionEnd hooks 1.5 s in all, too little for
#: a cold start on a busy machine to end the session.
HOOK_TIMEOUT_SECONDS = 10
MCP_NAME = "eventcoord"
BEGIN, END = "# >>> eventcoord >>>", "# <<< eventcoord <<<"
#: The whole-file pre-push hook that ``eventcoord hook install`` wrote: all of it is ours.
LEGACY_MARKER = "# eventcoord pre-push hook"
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash"}


class SetupError(Exception):
    """A file eventcoord cannot merge into (malformed JSON, a hook in another language)."""


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _load(shown: str, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise SetupError(f"{shown}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); fix it") from None
    if not isinstance(doc, dict):
        raise SetupError(f"{shown}: holds {_json_type(doc)}, not a JSON object; fix it")
    return doc


def _dump(doc: dict[str, Any], like: str | None) -> str:
    """``doc`` as JSON, indented as the file was (two spaces for a new or one-line file)."""
    indent: str | int = 2
    for line in (like or "").splitlines()[1:]:
        body = line.lstrip(" \t")
        if body and len(body) < len(line):
            indent = line[: len(line) - len(body)]
            break
    return json.dumps(doc, indent=indent, ensure_ascii=False) + "\n"


def _section(shown: str, doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.setdefault(key, {})
    if not isinstance(value, dict):
        raise SetupError(f"{shown}: `{key}` is {_json_type(value)}, not a JSON object; fix it")
    return value


def _is_eventcoord(words: list[str]) -> bool:
    return any(Path(w).name.split(".")[0] == "eventcoord" for w in words)


def own_hook(hook: object, harness: str) -> bool:
    """Whether a hook entry runs ``eventcoord hook <harness>`` (however eventcoord is named)."""
    if not isinstance(hook, dict) or hook.get("type") != "command" or not isinstance(hook.get("command"), str):
        return False
    try:
        words = shlex.split(hook["command"])
    except ValueError:
        return False
    return len(words) >= 3 and words[-2:] == ["hook", harness] and _is_eventcoord(words[:-2])


def _group(event: str, harness: str, executable: list[str]) -> dict[str, Any]:
    hook = {"type": "command", "command": shlex.join([*executable, "hook", harness]), "timeout": HOOK_TIMEOUT_SECONDS}
    return {"matcher": WRITE_TOOLS[harness], "hooks": [hook]} if event == "PreToolUse" else {"hooks": [hook]}


def _without_own(groups: list[Any], harness: str) -> tuple[list[Any], int]:
    """The groups with eventcoord's hooks taken out (a group left empty by that goes too)."""
    kept_groups, removed = [], 0
    for group in groups:
        hooks = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(hooks, list) or not hooks:
            kept_groups.append(group)
            continue
        kept = [h for h in hooks if not own_hook(h, harness)]
        removed += len(hooks) - len(kept)
        if len(kept) == len(hooks):
            kept_groups.append(group)
        elif kept:
            kept_groups.append({**group, "hooks": kept})
    return kept_groups, removed


def harness_hooks(
    shown: str, text: str | None, harness: str, executable: list[str], remove: bool
) -> tuple[str | None, list[str]]:
    """``.claude/settings.json`` or ``.codex/hooks.json`` (one format): a command hook per event."""
    doc = _load(shown, text)
    hooks = _section(shown, doc, "hooks")
    missing: list[str] = []
    removed = 0
    for event in list(hooks) if remove else EVENTS:
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise SetupError(f"{shown}: `hooks.{event}` is {_json_type(groups)}, not a JSON array; fix it")
        wanted = _group(event, harness, executable)
        own = sum(1 for g in groups if isinstance(g, dict) for h in g.get("hooks") or [] if own_hook(h, harness))
        if not remove and own == 1 and wanted in groups:
            continue
        kept, n = _without_own(groups, harness)
        removed += n
        if remove:
            if n and not kept:
                del hooks[event]
            elif n:
                hooks[event] = kept
        else:
            missing.append(f"{shown}: the {event} hook (`eventcoord hook {harness}`)")
            hooks[event] = [*kept, wanted]
    if remove:
        if not removed:
            return text, []
        if not hooks:
            del doc["hooks"]
        return (_dump(doc, text) if doc else None), []
    return (text if not missing else _dump(doc, text)), missing


def _own_server(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    args = entry.get("args")
    words = [str(entry.get("command", ""))] + ([str(a) for a in args] if isinstance(args, list) else [])
    return "mcp" in words and _is_eventcoord(words)


def mcp_server(shown: str, text: str | None, executable: list[str], remove: bool) -> tuple[str | None, list[str]]:
    """``.mcp.json``: the ``eventcoord`` server (``eventcoord mcp`` on stdio) under ``mcpServers``."""
    doc = _load(shown, text)
    servers = _section(shown, doc, "mcpServers")
    entry = servers.get(MCP_NAME)
    if remove:
        if not _own_server(entry):
            return text, []
        del servers[MCP_NAME]
        if not servers:
            del doc["mcpServers"]
        return (_dump(doc, text) if doc else None), []
    wanted = {"type": "stdio", "command": executable[0], "args": [*executable[1:], "mcp"]}
    # A server of that name reached over HTTP (``eventcoord mcp --transport http``) is the user's choice.
    if isinstance(entry, dict) and (
        entry.get("type") in ("http", "sse") or all(entry.get(k) == v for k, v in wanted.items())
    ):
        return text, []
    servers[MCP_NAME] = {**(entry if isinstance(entry, dict) else {}), **wanted}
    return _dump(doc, text), [f"{shown}: the MCP server `{MCP_NAME}` (`eventcoord mcp`)"]


# --- git hooks -------------------------------------------------------------------------


def git_hook_block(name: str, executable: list[str]) -> str:
    """What eventcoord adds to a git hook: this installation's eventcoord, else the one on PATH,
    else a warning that says what to do.

    A git hook stays in its clone, so naming this interpreter is safe while the installation
    is there (its module file is checked, not only the interpreter); the fallback keeps the
    hook working once it is gone (or when ``core.hooksPath`` is shared). Git hooks often run
    with another PATH than the shell's (an IDE, a harness's sandbox): when neither is found,
    the gate says so and lets the commit or push through, as it does without a server,
    rather than failing with the shell's "not found" (exit 127).
    """
    import sys

    import eventcoord

    python = shlex.quote(sys.executable)
    module = shlex.quote(str(Path(eventcoord.__file__).resolve().parent / "cli" / "__main__.py"))
    args = ' "$@"' if name == "pre-push" else ""
    fallback = shlex.join([*executable, "hook", name])
    action = "committing" if name == "pre-commit" else "pushing"
    before, after = (
        f"eventcoord: warning: the {name} gate did not run: {executable[0]} is not on this hook's PATH (",
        f") and {sys.executable} no longer has eventcoord; {action} without the gate. Put eventcoord on the "
        "PATH git hooks see, or run 'eventcoord init' again from the installation you use",
    )
    warning = f'{shlex.quote(before)}"$PATH"{shlex.quote(after)}'
    return (
        f"{BEGIN} written by `eventcoord init`; `eventcoord init --remove` takes it out\n"
        f"if [ -x {python} ] && [ -f {module} ]; then {python} -m eventcoord.cli hook {name}{args} || exit $?\n"
        f"elif command -v {shlex.quote(executable[0])} >/dev/null 2>&1; then {fallback}{args} || exit $?\n"
        f"else echo {warning} >&2; fi\n"
        f"{END}\n"
    )


_BLOCK = re.compile(rf"^{re.escape(BEGIN)}.*?^{re.escape(END)}[^\n]*\n?", re.MULTILINE | re.DOTALL)


def _interpreter(first_line: str) -> str | None:
    if not first_line.startswith("#!"):
        return None
    words = first_line[2:].split()
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return Path(words[0]).name if words else None


def git_hook(
    shown: str, text: str | None, name: str, executable: list[str], remove: bool
) -> tuple[str | None, list[str]]:
    """A git hook with eventcoord's block: first, right after the ``#!`` line, so it runs
    before any ``exec`` of the user's own; the user's lines are kept as they are."""
    legacy = text is not None and LEGACY_MARKER in text and not _BLOCK.search(text)
    if remove:
        if text is None or legacy:
            return (None if legacy else text), []
        rest = _BLOCK.sub("", text, count=1)
        if rest == text:
            return text, []
        lines = rest.splitlines()
        body = lines[1:] if lines and lines[0].startswith("#!") else lines
        return (rest if any(line.strip() for line in body) else None), []
    block = git_hook_block(name, executable)
    missing = [f"{shown}: eventcoord's {name} gate"]
    if text is None or legacy or not text.strip():
        return "#!/bin/sh\n" + block, missing
    found = _BLOCK.search(text)
    if found:
        if found.group(0) == block:
            return text, []
        return text[: found.start()] + block + text[found.end() :], missing
    first, _, rest = text.partition("\n")
    shell = _interpreter(first)
    if first.startswith("#!") and shell not in _SHELLS:
        raise SetupError(
            f"{shown} is a {shell} script, and eventcoord merges only into shell hooks: call "
            f"`eventcoord hook {name}` from it yourself (exit on failure), or move it aside; then run init again"
        )
    if not first.startswith("#!"):
        return "#!/bin/sh\n" + block + text, missing
    return f"{first}\n{block}{rest}", missing
