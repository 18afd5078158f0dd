"""Text for the model within a budget of characters: whole lines while they fit, then a count.

The harness adds what a hook answers to the model's context, so it is short by
construction: sections in order of importance, each a title and its lines; a line that
would not fit is left out, and the section says how many were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The most a hook tells the model at once.
CONTEXT_CAP = 4000
#: The most of one line (a message, a note, a session's holdings) before it is cut.
LINE_CAP = 500


def cut(text: str, cap: int = LINE_CAP) -> str:
    """``text`` on one line (whitespace runs become one space), at most ``cap`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= cap else flat[: cap - 1] + "…"


@dataclass(frozen=True, slots=True)
class Section:
    """A title line and its item lines; ``more`` says how many items were left out (``{n}``)."""

    title: str
    items: Sequence[str] = ()
    more: str = "- … {n} more not shown"


def fit(sections: Sequence[Section], cap: int = CONTEXT_CAP) -> str:
    """The sections as lines, never longer than ``cap``: items that do not fit are counted
    in their section's ``more`` line; a section whose title does not fit is left out."""
    lines: list[str] = []
    used = -1  # the first line has no newline before it

    def room_for(text: str, reserve: int = 0) -> bool:
        return used + 1 + len(text) + reserve <= cap

    for section in sections:
        if not room_for(section.title):
            break
        lines.append(section.title)
        used += 1 + len(section.title)
        items = section.items
        for shown, item in enumerate(items):
            left = len(items) - shown - 1
            reserve = 1 + len(section.more.format(n=left)) if left else 0
            if not room_for(item, reserve):
                note = section.more.format(n=len(items) - shown)
                if room_for(note):  # kept for it once an item was shown
                    lines.append(note)
                    used += 1 + len(note)
                break
            lines.append(item)
            used += 1 + len(item)
    return "\n".join(lines)
