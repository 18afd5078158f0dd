"""Names the mirror lives by: the repository, which GitHub issue a key is, who a login is.

An eventcoord issue key is GitHub issue N when it ends in ``#N`` or ``-N``; an actor maps to
a GitHub login through the ``--logins`` map (by its actor key, else by its name: the part
before the first ``:``), and a hold the mirror records for a person is actor ``github:<login>``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

WIP = "WIP"
QUEUED = "ai-dev-queued"
#: The actor prefix of the sessions that hold an issue for a person who marked it WIP on GitHub.
HOLD_PREFIX = "github:"

_REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
_NUMBER = re.compile(r"(?:#|-)([0-9]{1,9})\Z")
# GitHub's own rule: alphanumerics and single hyphens, not at either end, at most 39.
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")
_KEY_CHARS = re.compile(r"[^A-Za-z0-9.:/#-]")


class LoginsError(ValueError):
    """The logins file is not a JSON object from actor keys (or names) to GitHub logins."""


def is_repo(value: str) -> bool:
    """``OWNER/NAME`` as GitHub spells repositories."""
    return _REPO.fullmatch(value) is not None and value.split("/")[1] not in (".", "..")


def is_login(value: str) -> bool:
    """A GitHub login (so it can never be read as a ``gh`` flag)."""
    return _LOGIN.fullmatch(value) is not None


def issue_number(key: str) -> int | None:
    """The GitHub issue an eventcoord issue key names (``P-123``, ``repo#123``), else None."""
    m = _NUMBER.search(key)
    if m is None or int(m.group(1)) == 0:
        return None
    return int(m.group(1))


def memory_channel(repo: str) -> str:
    """The channel where the mirror of ``repo`` keeps its memory, one per repository.

    GitHub names are case-insensitive, so the name is lower-cased; a character a channel
    name may not hold (``_``) becomes ``-`` and a digest of the exact name keeps it unique.
    """
    name = repo.lower()
    safe = _KEY_CHARS.sub("-", name)
    if safe != name:
        safe += "#" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"project:github/{safe}"


def hold_actor(login: str) -> str:
    """The actor of a session that holds an issue for ``login``."""
    return HOLD_PREFIX + login


@dataclass(frozen=True)
class Logins:
    """Actor keys (or actor names) to GitHub logins."""

    by_actor: Mapping[str, str] = field(default_factory=dict)

    def login_of(self, actor_key: str) -> str | None:
        """The login of an actor: a hold's own, else by actor key, else by actor name."""
        if actor_key.startswith(HOLD_PREFIX):
            login = actor_key[len(HOLD_PREFIX) :]
            return login if is_login(login) else None
        if actor_key in self.by_actor:
            return self.by_actor[actor_key]
        return self.by_actor.get(actor_key.split(":", 1)[0])


def parse_logins(text: str) -> Logins:
    """The logins map from a file's text; LoginsError names what is wrong."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise LoginsError(f"not JSON: {e}") from None
    if not isinstance(value, dict):
        raise LoginsError(f"not a JSON object of strings but {_kind(value)}")
    for actor, login in value.items():
        if not isinstance(login, str):
            raise LoginsError(f"the value of {actor!r} is not a string but {_kind(login)}")
        if not actor:
            raise LoginsError("an empty actor key")
        if not is_login(login):
            raise LoginsError(f"the value of {actor!r} is not a GitHub login: {login!r}")
    return Logins(dict(value))


def _kind(value: object) -> str:
    """What a decoded JSON value is, in JSON's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
