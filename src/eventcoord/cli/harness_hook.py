"""``eventcoord hook claude|codex``: a coding agent's hook payload (stdin) to ``/v1/hooks/<harness>``.

The answer's body goes to stdout unchanged, exit 0. A harness runs this at every tool call,
so it loads only the standard library, and eventcoord being away never stops the agent:
no server, a 5xx or no answer within 2 s prints nothing on stdout, one line on stderr,
exit 0; a 4xx (a missing or refused token, a payload the route does not take) likewise,
naming the code. With ``EVENTCOORD_HOOK_FAIL=closed`` a ``PreToolUse`` of a file-writing
tool exits 2 instead, the reason on stderr (the harness shows it to the model and skips
the edit); every other event still passes.
"""

from __future__ import annotations

import os
import sys

from eventcoord.client.locate import locate
from eventcoord.client.oneshot import request

HARNESSES = ("claude", "codex")
#: Seconds the whole exchange may take before the hook gives up on the server.
DEADLINE_SECONDS = 2.0
#: The tools whose ``PreToolUse`` the route answers by claiming the files they write (Claude Code's
#: Write, Edit, MultiEdit, NotebookEdit; Codex's apply_patch), the same in either harness.
CLAIMING_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch"})
FAIL_MODE_VARIABLE = "EVENTCOORD_HOOK_FAIL"


def main(argv: list[str]) -> int | None:
    """``claude|codex [--url U] [--token T]``; None for anything else (argparse explains it)."""
    harness, options = argv[0], argv[1:]
    given: dict[str, str] = {}
    while options:
        name, sep, value = options.pop(0).partition("=")
        if name not in ("--url", "--token") or name in given:
            return None
        if not sep:
            if not options:
                return None
            value = options.pop(0)
        given[name] = value
    return run(harness, given.get("--url"), given.get("--token"))


def run(harness: str, url: str | None = None, token: str | None = None) -> int:
    """Send stdin's payload to the route; print its answer. The exit code for the harness."""
    payload = sys.stdin.buffer.read()
    target = locate(url, token)
    try:
        status, answer = request(
            "POST", f"{target.url}/v1/hooks/{harness}", target.token, payload, timeout=DEADLINE_SECONDS
        )
    except TimeoutError:
        problem = f"no answer from the eventcoord server at {target.url} within {DEADLINE_SECONDS:g} s"
    except OSError as e:
        problem = f"cannot reach the eventcoord server at {target.url} ({e.strerror or e})"
    except ValueError as e:  # a URL or token that cannot be sent, a garbled answer
        problem = f"cannot talk to the eventcoord server at {target.url}: {e}"
    else:
        if 200 <= status < 300:
            sys.stdout.buffer.write(answer)
            sys.stdout.flush()
            return 0
        problem = _refusal(status, answer, target.source)
    return _failed(harness, payload, problem)


def _refusal(status: int, answer: bytes, token_source: str) -> str:
    """One line for an answer that is not a success: the status, the error code and message."""
    if status >= 500:
        return f"the eventcoord server failed (HTTP {status})"
    import json

    try:
        error = json.loads(answer)["error"]
        code, message = str(error["code"]), str(error.get("message", ""))
        field = (error.get("details") or {}).get("field")
    except (ValueError, TypeError, KeyError):
        code, message, field = f"HTTP_{status}", answer[:200].decode("utf-8", "replace"), None
    line = f"the eventcoord server refused the hook: {status} {code}"
    if message:
        line += f": {message}"
    if field:
        line += f" (field {field})"
    if status == 401:
        line += f" (token from {token_source}; set EVENTCOORD_TOKEN or --token)"
    return " ".join(line.split())  # one line, whatever the message held


def _failed(harness: str, payload: bytes, problem: str) -> int:
    if os.environ.get(FAIL_MODE_VARIABLE, "").strip().lower() == "closed" and claims_files(payload):
        print(
            f"eventcoord: this edit was not made: coordination is unavailable ({problem}), and "
            f"{FAIL_MODE_VARIABLE}=closed stops file edits until the server answers. Retry the edit "
            "once it is back, or ask the user to start it (eventcoord serve).",
            file=sys.stderr,
        )
        return 2
    print(f"eventcoord hook {harness}: {problem}; this hook call is not coordinated", file=sys.stderr)
    return 0


def claims_files(payload: bytes) -> bool:
    """Whether ``payload`` is a ``PreToolUse`` of a tool whose paths the route would claim."""
    import json

    try:
        event = json.loads(payload)
    except ValueError:
        return False
    if not isinstance(event, dict) or event.get("hook_event_name") != "PreToolUse":
        return False
    tool = event.get("tool_name")
    return isinstance(tool, str) and tool in CLAIMING_TOOLS
