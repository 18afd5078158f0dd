"""The name of every event stream, in one place: ``<kind>:<key>``.

Streams group the events of one thing (a session, an issue, a work item …); a guard row
that serialises decisions about a thing is keyed by the same name.
"""

from __future__ import annotations


def session(session_id: str) -> str:
    """The events of one session (register, heartbeats, end)."""
    return f"session:{session_id}"


def issue(issue: str) -> str:
    """The leases and handoff notes of one issue."""
    return f"issue:{issue}"


def project(project: str) -> str:
    """A project's configuration and WIP-cap denials."""
    return f"project:{project}"


def files(issue: str) -> str:
    """The file claims made for one issue (and the conflicts on its behalf)."""
    return f"files:{issue}"


def channel(channel: str) -> str:
    """The messages of one channel (``issue:…``, ``agent:…`` or ``project:…``)."""
    return f"channel:{channel}"


def work(item_id: str) -> str:
    """The transitions of one work item."""
    return f"work:{item_id}"


def named_lease(name: str) -> str:
    """The grants, renewals and releases of one named lease."""
    return f"lease:{name}"
