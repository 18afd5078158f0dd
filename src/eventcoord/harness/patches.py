"""The paths a Codex ``apply_patch`` envelope writes: every added, updated, deleted or moved-to file.

The envelope is ``*** Begin Patch`` … ``*** End Patch``; each file starts with a header
(``*** Add File: P``, ``*** Delete File: P``, ``*** Update File: P`` optionally followed by
``*** Move to: Q``). It is read the way Codex's own parser reads it: a header line is
trimmed; an added file's lines start with ``+``; an update's lines are blank, ``@@``
context markers, ``*** End of File``, or start with a space, ``+`` or ``-`` — so a content
line that only looks like a header is never taken for one.
"""

from __future__ import annotations

_ADD = "*** Add File: "
_DELETE = "*** Delete File: "
_UPDATE = "*** Update File: "
_MOVE = "*** Move to: "
_END_OF_FILE = "*** End of File"
_HEREDOC_OPENERS = ("<<EOF", "<<'EOF'", '<<"EOF"')


def _body(patch: str) -> list[str]:
    """The lines between the begin and end markers (all of them, when a marker is missing)."""
    lines = patch.strip().splitlines()
    if len(lines) >= 4 and lines[0] in _HEREDOC_OPENERS and lines[-1].endswith("EOF"):
        lines = lines[1:-1]  # the heredoc form Codex also accepts
    if lines and lines[0].strip() == "*** Begin Patch":
        lines = lines[1:]
    if lines and lines[-1].strip() == "*** End Patch":
        lines = lines[:-1]
    return lines


def _in_update(line: str) -> bool:
    """A line of an update's hunks (not the next file's header)."""
    return not line.strip() or line.startswith((" ", "+", "-", "@@")) or line == _END_OF_FILE


def patch_paths(patch: str) -> list[str]:
    """Every path a file header of ``patch`` names, in order, each once (as written)."""
    lines = _body(patch)
    found: list[str] = []

    def add(path: str) -> None:
        if path and path not in found:
            found.append(path)

    i, n = 0, len(lines)
    while i < n:
        header = lines[i].strip()
        i += 1
        if header.startswith(_ADD):
            add(header[len(_ADD) :])
            while i < n and lines[i].startswith("+"):
                i += 1
        elif header.startswith(_DELETE):
            add(header[len(_DELETE) :])
        elif header.startswith(_UPDATE):
            add(header[len(_UPDATE) :])
            if i < n and lines[i].startswith(_MOVE):
                add(lines[i][len(_MOVE) :].strip())
                i += 1
            while i < n and _in_update(lines[i]):
                i += 1
    return found
