"""Text that cannot lie, actors that are never cut, and refusals in words, over HTTP on both
backends and through the CLI.

Bidirectional controls and zero-width characters are removed from untrusted text when the
event is built (``alice\\u202egnp.exe`` once showed as "aliceexe.png"); names that are keys,
and paths, refuse them. An actor is never cut to 64 characters nor replaced when empty: it
is refused, and a refusal says in words what is allowed, never with a regular expression.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tests.helpers import BOOTSTRAP, Api, ServerProcess

INVISIBLE = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200c\u200d\ufeff"


async def test_bidi_and_zero_width_characters_are_removed_from_what_is_stored_and_served(api: Api) -> None:
    sid = await api.register(actor="alice\u202egnp.exe", host="lap\u200btop")
    [registered] = [e for e in await api.events("AgentRegistered") if e["data"]["session_id"] == sid]
    assert registered["data"]["actor_key"] == "alicegnp.exe"
    assert registered["data"]["host"] == "laptop"
    agents = await api.agents()
    assert agents[sid]["actor_key"] == "alicegnp.exe"
    body = "merge " + "".join(f"x{c}" for c in INVISIBLE) + "\nnow\tplease"
    await api.ok({"type": "post_message", "channel": "issue:P-1", "body": body, "session_id": sid})
    [posted] = await api.events("MessagePosted")
    assert posted["data"]["body"] == "merge " + "x" * len(INVISIBLE) + "\nnow\tplease"
    served = await api.get("/v1/messages", channel="issue:P-1")
    text = str(served)
    assert "x" * len(INVISIBLE) in text and not any(c in text for c in INVISIBLE)
    note = f"hand{INVISIBLE}off"
    await api.ok({"type": "end_agent", "session_id": sid, "handoff_note": note})
    [ended] = await api.events("AgentEnded")
    assert ended["data"]["handoff_note"] == "handoff"


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u200b", "\ufeff"])
async def test_keys_channels_and_paths_refuse_invisible_characters(api: Api, char: str) -> None:
    sid = await api.register(actor="bob")
    head = await api.head()
    for body, field in (
        ({"type": "claim_issue", "session_id": sid, "project": "P", "issue": f"P-{char}1"}, "issue"),
        ({"type": "claim_issue", "session_id": sid, "project": f"P{char}", "issue": "P-1"}, "project"),
        ({"type": "acquire_lease", "session_id": sid, "name": f"lead{char}er"}, "name"),
        ({"type": "post_message", "channel": f"issue:P-1{char}", "body": "b"}, "channel"),
        ({"type": "claim_files", "session_id": sid, "issue": "P-1", "paths": ["ok.py", f"gnp{char}.exe"]}, "paths[1]"),
    ):
        err = await api.error(body, 422, "VALIDATION")
        assert err["details"]["field"] == field, (body, err)
    assert await api.head() == head  # nothing recorded


async def test_an_actor_is_refused_rather_than_cut_or_replaced_and_refusals_say_it_in_words(api: Api) -> None:
    head = await api.head()
    for actor in ("", "a" * 65, "x" * 10_000, "\x00\x01", "\u202e\u200b"):
        err = await api.error({"type": "register_agent", "actor": actor}, 422, "VALIDATION")
        assert err["details"]["field"] == "actor", (actor, err)
        assert "regex" not in err["message"]
    assert await api.head() == head
    # Two long names never become one actor: each fits, or is refused.
    a, b = "n" * 64, "n" * 63 + "m"
    sa, sb = await api.register(actor=a), await api.register(actor=b)
    agents = await api.agents()
    assert (agents[sa]["actor_key"], agents[sb]["actor_key"]) == (a, b)
    # Every name's refusal says in words what is allowed.
    for body, field, words in (
        ({"type": "claim_issue", "session_id": sa, "project": "P", "issue": "P 1"}, "issue", "letters, digits"),
        ({"type": "issue_token", "role": "agent", "workspace": "no spaces"}, "workspace", "letters, digits, _ and -"),
        ({"type": "post_message", "channel": "room:1", "body": "b"}, "channel", "issue:<key>"),
        ({"type": "revoke_token", "token_id": "tok_x"}, "token_id", "24 lowercase hexadecimal digits"),
        ({"type": "register_agent", "command_id": ""}, "command_id", "must not be empty"),
        ({"type": "register_agent", "actor": "a" * 65}, "actor", "at most 64 characters"),
    ):
        err = await api.error(body, 422, "VALIDATION")
        assert err["details"]["field"] == field
        assert words in err["message"], err["message"]
        for regex_syntax in ("regex", "\\Z", "^[", "(?!", "{0,127}"):
            assert regex_syntax not in err["message"], err["message"]


@pytest.mark.sqlite
def test_the_cli_refuses_an_empty_or_overlong_actor_with_exit_1(server: ServerProcess) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTCOORD_")}
    env |= {"EVENTCOORD_URL": server.base_url, "EVENTCOORD_TOKEN": BOOTSTRAP}

    def register(actor: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "eventcoord.cli", "register-agent", "--actor", actor, "--print", "session_id"]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)

    for actor in ("", "x" * 10_000):
        done = register(actor)
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert done.stderr.startswith("VALIDATION") and "actor" in done.stderr
        assert "unresolved:" not in done.stdout and "regex" not in done.stderr
    fine = register("alice\u202egnp.exe")
    assert fine.returncode == 0 and fine.stdout.strip().startswith("s")
