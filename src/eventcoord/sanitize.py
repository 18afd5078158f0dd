"""Sanitising untrusted text at event construction, and validating names that are keys.

Text one participant writes and another reads is cleaned once, when the event is built,
never at print time: control characters, bidirectional controls and zero-width characters
are stripped (text that cannot lie about what it says), then the length is capped.
"""

from __future__ import annotations

import re

ACTOR_CAP = 64
HOST_CAP = 64
BODY_CAP = 4096

#: Characters that change how text is shown without being seen: the bidirectional embeddings,
#: overrides and isolates (U+202A to U+202E, U+2066 to U+2069: "alice\u202egnp.exe" shows as
#: "aliceexe.png") and the zero-width space, joiners and no-break space (U+200B to U+200D, U+FEFF).
INVISIBLE = "\u200b-\u200d\u202a-\u202e\u2066-\u2069\ufeff"
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{INVISIBLE}]")
# Bodies and notes keep newline and tab (docs/protocol.md#concepts); every other control character goes.
_CONTROL_BUT_NEWLINE_TAB = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{INVISIBLE}]")

# Names that are keys match as WHOLE strings, under one pattern that means the same to
# Python's ``re.search`` (msgspec validates with it) and to ECMAScript (JSON Schema
# clients; with or without the ``u`` flag). Python's ``$`` also matches before a final
# newline ("NL-1\n" would pass ``^…$``) and ``\Z`` is no ECMAScript, so each pattern
# ends in ``(?!\n)$``: the end, and not the place before a final newline.
_KEY_BODY = r"[A-Za-z0-9][A-Za-z0-9._:/#-]{0,127}"
_WORKSPACE_BODY = r"[A-Za-z0-9_-]{1,64}"
_CHANNEL_BODY = r"(issue|agent|project):" + _KEY_BODY
# Its length (1 to 128) is bounded by the schema's maxLength, not here: without the ``u``
# flag ECMAScript counts a character outside the BMP as two, Python as one.
_COMMAND_ID_BODY = r"[^\x00-\x1f\x7f-\x9f]+"
_TOKEN_ID_BODY = r"tok_[0-9a-f]{24}"
_END = r"(?!\n)$"

KEY_PATTERN = f"^{_KEY_BODY}{_END}"
WORKSPACE_PATTERN = f"^{_WORKSPACE_BODY}{_END}"
CHANNEL_PATTERN = f"^{_CHANNEL_BODY}{_END}"
COMMAND_ID_PATTERN = f"^{_COMMAND_ID_BODY}{_END}"
TOKEN_ID_PATTERN = f"^{_TOKEN_ID_BODY}{_END}"

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
    """Strip every control character (C0, DEL, C1) and invisible one, then cap the length."""
    if value is None:
        return None
    return _CONTROL.sub("", value)[:cap]


def clean_text(value: str | None, cap: int = BODY_CAP) -> str | None:
    """Like :func:`clean_line` but keeps newline and tab (message bodies, handoff notes)."""
    if value is None:
        return None
    return _CONTROL_BUT_NEWLINE_TAB.sub("", value)[:cap]
