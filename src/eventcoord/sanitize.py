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

# Names that are keys match as WHOLE strings. Python's ``$`` also matches before a final
# newline ("NL-1\n" would pass ``^…$``), so the patterns end in ``\Z``; ``*_SCHEMA`` are the
# same languages in JSON Schema (ECMA-262) syntax, where ``$`` is the end of the string.
_KEY_BODY = r"[A-Za-z0-9][A-Za-z0-9._:/#-]{0,127}"
_WORKSPACE_BODY = r"[A-Za-z0-9_-]{1,64}"
_CHANNEL_BODY = r"(issue|agent|project):" + _KEY_BODY
_COMMAND_ID_BODY = "[^\x00-\x1f\x7f-\x9f]{1,128}"

KEY_PATTERN = rf"^{_KEY_BODY}\Z"
WORKSPACE_PATTERN = rf"^{_WORKSPACE_BODY}\Z"
CHANNEL_PATTERN = rf"^{_CHANNEL_BODY}\Z"
COMMAND_ID_PATTERN = f"^{_COMMAND_ID_BODY}\\Z"

KEY_SCHEMA = f"^{_KEY_BODY}$"
WORKSPACE_SCHEMA = f"^{_WORKSPACE_BODY}$"
CHANNEL_SCHEMA = f"^{_CHANNEL_BODY}$"
COMMAND_ID_SCHEMA = f"^{_COMMAND_ID_BODY}$"

_KEY_RE = re.compile(_KEY_BODY)
_WORKSPACE_RE = re.compile(_WORKSPACE_BODY)
_CHANNEL_RE = re.compile(_CHANNEL_BODY)


def is_key(value: str) -> bool:
    """``value`` is a whole key (issue, project, lease name, session id)."""
    return _KEY_RE.fullmatch(value) is not None


def is_workspace(value: str) -> bool:
    """``value`` is a whole workspace name (a NATS subject token)."""
    return _WORKSPACE_RE.fullmatch(value) is not None


def is_channel(value: str) -> bool:
    """``value`` is a whole channel name (``issue:<key>``, ``agent:<id>``, ``project:<key>``)."""
    return _CHANNEL_RE.fullmatch(value) is not None


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
