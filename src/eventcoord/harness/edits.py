"""Which files a tool call is about to write, as claim patterns relative to the session's cwd.

Claude Code's ``Write``, ``Edit`` and ``MultiEdit`` name ``tool_input.file_path``,
``NotebookEdit`` ``tool_input.notebook_path``; Codex's ``apply_patch`` carries a patch
envelope (``harness.patches``). Every other tool writes nothing we claim. A path is claimed
only when it lies inside ``cwd`` and has no ``..`` segment or NUL; relative paths are taken
from ``cwd``. A file's name is a literal, so the claim pattern escapes the characters the
pattern language reads as wildcards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventcoord import errors
from eventcoord.domain.paths import PathError, normalise_path
from eventcoord.harness.patches import patch_paths

#: Writing tools whose target is one path in ``tool_input``, by the field that names it.
PATH_FIELDS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
#: Writing tools whose targets are the file headers of a patch in ``tool_input.command``.
PATCH_TOOLS = ("apply_patch",)
_WILDCARDS = str.maketrans({c: "\\" + c for c in "\\*?[]"})


@dataclass(frozen=True, slots=True)
class Target:
    """One file a tool call writes: the claim pattern, and the path as the session sees it."""

    pattern: str
    path: str


def written_paths(tool_name: str, tool_input: Any) -> list[str] | None:
    """The paths a tool call writes, as the tool names them; None for a tool that writes none.

    A writing tool whose input lacks its path is not a hook payload: 422 naming the field.
    """
    field = PATH_FIELDS.get(tool_name)
    if field is not None:
        value = tool_input.get(field) if isinstance(tool_input, dict) else None
        if not isinstance(value, str):
            raise errors.invalid(f"tool_input.{field}", f"{tool_name} needs tool_input.{field}, a string")
        return [value]
    if tool_name in PATCH_TOOLS:
        patch = tool_input.get("command") if isinstance(tool_input, dict) else tool_input
        if not isinstance(patch, str):
            raise errors.invalid("tool_input.command", f"{tool_name} needs the patch in tool_input.command")
        return patch_paths(patch)
    return None


def relative_to(path: str, cwd: str) -> str | None:
    """``path`` relative to ``cwd`` (both POSIX; a relative ``path`` is taken from ``cwd``), or
    None when it lies outside ``cwd``, is ``cwd`` itself, or has a ``..`` segment or a NUL."""
    if "\x00" in path or "\x00" in cwd or not cwd.startswith("/"):
        return None
    full = path if path.startswith("/") else f"{cwd}/{path}"
    if ".." in full.split("/") or ".." in cwd.split("/"):
        return None
    root = [s for s in cwd.split("/") if s not in ("", ".")]
    parts = [s for s in full.split("/") if s not in ("", ".")]
    if len(parts) <= len(root) or parts[: len(root)] != root:
        return None
    return "/".join(parts[len(root) :])


def claim_pattern(relative: str) -> str | None:
    """The claim pattern naming exactly the file ``relative``; None when no claim can name it
    (a control character, too long once escaped)."""
    try:
        return normalise_path(relative.translate(_WILDCARDS))
    except PathError:
        return None


def targets(tool_name: str, tool_input: Any, cwd: str) -> list[Target] | None:
    """What a tool call writes inside ``cwd``, each file once; None for a tool that writes nothing."""
    paths = written_paths(tool_name, tool_input)
    if paths is None:
        return None
    out: list[Target] = []
    for path in paths:
        relative = relative_to(path, cwd)
        pattern = claim_pattern(relative) if relative is not None else None
        if relative is not None and pattern is not None and all(t.pattern != pattern for t in out):
            out.append(Target(pattern, relative))
    return out
