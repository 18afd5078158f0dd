"""The JSON a harness (Claude Code, Codex) gives a hook, as msgspec structs, and its decoding.

One struct per event, tagged by ``hook_event_name``; fields the harness adds that we do not
read are ignored. A body that is not a hook payload is a 422 ``VALIDATION`` naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from eventcoord import errors
from eventcoord.codec import field_of

#: The harnesses the hook route speaks for: each is a session's ``runtime``.
HARNESSES = ("claude", "codex")
Harness = Literal["claude", "codex"]

#: A harness's own session id: any length and characters (it is digested, never a key).
HarnessSessionId = Annotated[str, Meta(min_length=1)]


class _Common(msgspec.Struct, frozen=True, kw_only=True):
    """What every hook receives: the harness's session id and the session's working directory."""

    session_id: HarnessSessionId
    cwd: str
    transcript_path: str | None = None


class HookPayload(_Common, frozen=True, kw_only=True, tag_field="hook_event_name"):
    """A hook payload of an event this service answers, tagged by ``hook_event_name``."""


class SessionStart(HookPayload, frozen=True, kw_only=True, tag="SessionStart"):
    #: ``startup``, ``resume``, ``clear`` or ``compact``.
    source: str = "startup"


class UserPromptSubmit(HookPayload, frozen=True, kw_only=True, tag="UserPromptSubmit"):
    prompt: str = ""


class PreToolUse(HookPayload, frozen=True, kw_only=True, tag="PreToolUse"):
    tool_name: str
    #: The tool's arguments; its shape depends on the tool (``harness.edits`` reads the writers').
    tool_input: Any = None
    tool_use_id: str | None = None


class PostToolUse(HookPayload, frozen=True, kw_only=True, tag="PostToolUse"):
    tool_name: str = ""
    tool_input: Any = None
    tool_response: Any = None


class Stop(HookPayload, frozen=True, kw_only=True, tag="Stop"):
    stop_hook_active: bool = False
    last_assistant_message: str | None = None


class SessionEnd(HookPayload, frozen=True, kw_only=True, tag="SessionEnd"):
    reason: str | None = None


class OtherEvent(_Common, frozen=True, kw_only=True):
    """An event of the harness this service has nothing to say to (``Notification``,
    ``SubagentStop``, ``PreCompact``, …): still a sign of life of its session."""

    hook_event_name: str


AnyPayload = SessionStart | UserPromptSubmit | PreToolUse | PostToolUse | Stop | SessionEnd
_decoder = msgspec.json.Decoder(AnyPayload)
_other_decoder = msgspec.json.Decoder(OtherEvent)


def decode_payload(body: bytes) -> AnyPayload | OtherEvent:
    """The hook payload in ``body``; 422 ``VALIDATION`` naming the field when it is not one."""
    try:
        try:
            return _decoder.decode(body)
        except msgspec.ValidationError as e:
            if not str(e).startswith("Invalid value") or field_of(str(e)) != "hook_event_name":
                raise
            return _other_decoder.decode(body)  # another event's name: check the common fields
    except msgspec.ValidationError as e:
        raise errors.invalid(field_of(str(e)), f"not a hook payload: {e}") from None
    except msgspec.DecodeError as e:
        raise errors.invalid("body", f"malformed JSON: {e}") from None
    except RecursionError:
        raise errors.invalid("body", "JSON nested too deeply") from None
