"""POST /v1/hooks/{harness}: a coding-agent harness's hook, answered as the harness reads it;
GET /v1/hooks/{harness}/session: the eventcoord session a harness's session is bound to."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import MediaType, Request, Response, get, post
from litestar.params import Parameter

from eventcoord import errors
from eventcoord.api.deps import caller, runtime
from eventcoord.api.routes.commands import is_json
from eventcoord.codec import encode
from eventcoord.harness.payloads import Harness, decode_payload


@post(
    "/v1/hooks/{harness:str}",
    operation_id="postHook",
    summary="A harness's hook (Claude Code, Codex): the session bound, the answer the harness reads",
    status_code=200,
)
async def post_hook(
    request: Request[Any, Any, Any],
    harness: Annotated[Harness, Parameter(description="the harness sending the hook: claude or codex")],
) -> Response[bytes]:
    """Take the JSON the harness gives a hook and answer the JSON it reads from one.

    The harness's session is bound to one eventcoord session of the token's workspace
    (registered by its first hook, reused while live, renewed once ended or stale); every
    hook is a sign of life. ``SessionStart`` answers who else is here and what waits;
    ``UserPromptSubmit``, ``PostToolUse`` and ``Stop`` deliver new messages and lost holds
    once; a ``PreToolUse`` of a writing tool claims its files and, when another live session
    holds one, answers a ``deny`` naming path, holder and issue; ``SessionEnd`` ends the
    session with the last ``Stop``'s message as its handoff note. The answer is ``{}``,
    ``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`` or the PreToolUse
    deny; never an ``allow``. A body that is not a hook payload is 422 ``VALIDATION``.
    """
    who = await caller(request)
    content_type = request.headers.get("content-type")
    if content_type is not None and not is_json(content_type):
        raise errors.unsupported_media_type(content_type)
    payload = decode_payload(await request.body())
    answer = await runtime(request).hooks.answer(who, harness, payload)
    return Response(encode(answer), status_code=200, media_type=MediaType.JSON)


@get(
    "/v1/hooks/{harness:str}/session",
    operation_id="getHookSession",
    summary="The eventcoord session a harness's session is bound to",
)
async def get_hook_session(
    request: Request[Any, Any, Any],
    harness: Annotated[Harness, Parameter(description="the harness: claude or codex")],
    harness_session_id: Annotated[
        str,
        Parameter(
            query="id",
            min_length=1,
            description="the harness's own session id (CLAUDE_CODE_SESSION_ID, CODEX_THREAD_ID)",
        ),
    ],
) -> Response[bytes]:
    """``{"harness", "session_id", "actor_key", "live"}``: the eventcoord session the hooks of
    the harness session ``id`` act for, in the caller's workspace (any role may ask). A commit
    made inside the harness is that session's own (the pre-commit gate lets its claims pass).
    404 ``NOT_FOUND`` when no hook of that session has been answered."""
    who = await caller(request)
    found = await runtime(request).hooks.session_of(who, harness, harness_session_id)
    return Response(encode(found), status_code=200, media_type=MediaType.JSON)
