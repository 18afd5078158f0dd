"""Sanitising untrusted text at event construction, and validating names that are keys.

Text one participant writes and another reads is cleaned once, when the event is built,
never at print time: control characters are stripped, then the length is capped.
"""

from __future__ import annotations

import re

ACTOR_CAP = 64
HOST_CAP = 64
BODY_CAP = 4096

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# Bodies and notes keep newline and tab (SPEC §5); every other control character goes.
_CONTROL_BUT_NEWLINE_TAB = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/#-]{0,127}$"
WORKSPACE_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
CHANNEL_PATTERN = r"^(issue|agent|project):[A-Za-z0-9][A-Za-z0-9._:/#-]{0,127}$"


def clean_line(value: str | None, cap: int) -> str | None:
    """Strip every control character (C0, DEL, C1), then cap the length."""
    if value is None:
        return None
    return _CONTROL.sub("", value)[:cap]


def clean_text(value: str | None, cap: int = BODY_CAP) -> str | None:
    """Like :func:`clean_line` but keeps newline and tab (message bodies, handoff notes)."""
    if value is None:
        return None
    return _CONTROL_BUT_NEWLINE_TAB.sub("", value)[:cap]
