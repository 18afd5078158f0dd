"""What a hook answers: the JSON the harness reads from a hook's stdout.

Nothing to say is ``{}``; telling the model something is ``additionalContext`` for the
event; stopping a tool call is a PreToolUse ``deny`` with its reason. There is no ``allow``:
it would skip the user's own permission rules.
"""

from __future__ import annotations

from typing import Literal

import msgspec


# The harness spells its fields in camel case (``hookEventName``): ``rename`` writes them so.
class HookOutput(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, rename="camel"):
    """``hookSpecificOutput``: text for the model at an event, or a PreToolUse deny with its reason."""

    hook_event_name: str
    additional_context: str | None = None
    permission_decision: Literal["deny"] | None = None
    permission_decision_reason: str | None = None


class HookAnswer(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, rename="camel"):
    """A hook's answer; with no ``hookSpecificOutput`` it is ``{}``."""

    hook_specific_output: HookOutput | None = None


NOTHING = HookAnswer()


class HookSession(msgspec.Struct, frozen=True, kw_only=True):
    """The eventcoord session a harness's session is bound to (``GET /v1/hooks/{harness}/session``):
    how a commit made inside the harness knows its committer."""

    harness: str
    session_id: str
    actor_key: str | None
    #: The session is live now (a hook renews it; an ended or stale one is renewed by the next hook).
    live: bool


def tell(event: str, text: str) -> HookAnswer:
    """Add ``text`` to the model's context at ``event`` (nothing, when there is no text)."""
    return (
        HookAnswer(hook_specific_output=HookOutput(hook_event_name=event, additional_context=text)) if text else NOTHING
    )


def deny(reason: str) -> HookAnswer:
    """Stop the tool call; the model reads ``reason``."""
    output = HookOutput(hook_event_name="PreToolUse", permission_decision="deny", permission_decision_reason=reason)
    return HookAnswer(hook_specific_output=output)
