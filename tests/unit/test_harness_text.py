"""What the hooks tell the model: within 4,000 characters, naming what it must (no I/O)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from eventcoord.harness.bindings import beat_due, next_generation, thread_of
from eventcoord.harness.briefing import briefing
from eventcoord.harness.budget import CONTEXT_CAP, Section, cut, fit
from eventcoord.harness.denial import denial
from eventcoord.harness.news import news
from eventcoord.harness.reads import BindingRow, Message, Note, Peer, Release

SID = "s-0188f2a4c1d2e3f4a5b6c7d8e9f0a1b2"

lines = st.lists(st.text(min_size=0, max_size=700), max_size=40)


@given(st.lists(st.tuples(st.text(max_size=300), lines), max_size=6), st.integers(min_value=0, max_value=5000))
def test_fit_never_passes_its_cap(sections: list[tuple[str, list[str]]], cap: int) -> None:
    text = fit([Section(title, items) for title, items in sections], cap)
    assert len(text) <= cap


def test_fit_keeps_whole_lines_in_order_and_counts_the_rest() -> None:
    items = [f"- item {i} " + "x" * 80 for i in range(100)]
    text = fit([Section("head"), Section("items:", items)], 1000)
    shown = [line for line in text.splitlines() if line.startswith("- item")]
    assert shown == items[: len(shown)] and 5 < len(shown) < 100
    assert text.splitlines()[-1] == f"- … {100 - len(shown)} more not shown"
    assert len(text) <= 1000
    assert fit([Section("a"), Section("b", ["c"])]) == "a\nb\nc"


def test_cut_puts_text_on_one_line_within_its_cap() -> None:
    assert cut("a\n\tb   c") == "a b c"
    assert cut("x" * 50, 10) == "x" * 9 + "…"


def peer(i: int) -> Peer:
    return Peer(
        f"s-{i:032x}",
        f"agent-{i}",
        "codex" if i % 2 else None,
        "h",
        [f"P-{i}", f"Q-{i}"],
        [f"src/mod{i}/" + "d" * 50 + f"/{j}.py" for j in range(20)],
    )


def test_a_briefing_names_the_session_others_messages_lost_holds_and_notes() -> None:
    text = briefing(
        SID,
        "claude:thread-abc:hook",
        [peer(1)],
        [Message(9, "please\nleave b.py", "alice", "s-alice")],
        [Release(10, "lease", "P-9", [], "superseded", "s-carol")],
        [Note("OLD-1", "tests pass; docs next", "claude:thread-abc:hook", True)],
    )
    for part in (SID, "agent-1 [codex]", "P-1, Q-1", "src/mod1/", "please leave b.py", "alice"):
        assert part in text, part
    [line] = [line for line in text.splitlines() if "agent-1" in line]
    listed = re.search(r"; files (.*) \(\+(\d+) more\)$", line)
    assert listed and len(listed.group(1).split(", ")) + int(listed.group(2)) == 20 and len(line) <= 500
    assert "lease on issue P-9 was taken over" in text and "s-carol" in text
    assert "OLD-1 (note by you): tests pass; docs next" in text
    assert "No other live session" in briefing(SID, "a", [])


def test_a_briefing_is_at_most_4000_characters_however_much_there_is() -> None:
    peers = [peer(i) for i in range(12)]
    messages = [Message(i, "m" * 4096, "x" * 64, "s-x") for i in range(100)]
    notes = [Note(f"I-{i}", "n" * 4096, None, False) for i in range(5)]
    text = briefing(SID, "a" * 200, peers, messages, [], notes)
    assert len(text) <= CONTEXT_CAP == 4000
    assert text.startswith(f"eventcoord: this session is {SID}")
    assert "more not shown" in text


def test_news_says_what_arrived_and_is_empty_when_nothing_did() -> None:
    assert news(SID) == ""
    text = news(
        SID,
        [Message(3, "hi", "bob", None)],
        [Release(4, "files", "edit:s-1", ["a.py", "b.py"], "expired", "s-2")],
        registered=True,
        previous="s-old",
    )
    assert f"this session is now {SID}" in text and "s-old" in text
    assert "a.py, b.py" in text and "expired" in text and "from bob: hi" in text
    assert news(SID, registered=True) == f"eventcoord: this session is {SID}."
    many = news(SID, [Message(i, "z" * 600, "bob", None) for i in range(50)])
    assert len(many) <= 4000 and f"eventcoord messages --channel agent:{SID}" in many


def test_a_denial_names_each_path_its_holder_and_issue_and_the_ways_on() -> None:
    conflicts = [
        {
            "path": "src/app.py",
            "holder_path": "src/app.py",
            "holder_issue": "P-1",
            "holder_session_id": "s-alice",
            "holder_actor_key": "alice",
        },
        {
            "path": "docs/a b.md",
            "holder_path": "docs/",
            "holder_issue": "D-1",
            "holder_session_id": None,
            "holder_actor_key": "token:human",
        },
    ]
    text = denial(SID, "edit:" + SID, conflicts, {"docs/a b.md": "docs/a b.md"})
    assert "- src/app.py: held by alice (session s-alice) for issue P-1" in text
    assert "- docs/a b.md: held by token:human (no session: it yields only to force) for issue D-1, claim docs/" in text
    assert f"--session-id {SID} --channel agent:s-alice" in text
    assert f"claim-files --session-id {SID} --issue edit:{SID} --paths src/app.py 'docs/a b.md' --wait" in text
    assert "edit other files" in text


def test_a_denial_of_a_hundred_long_paths_still_says_what_to_do_within_the_cap() -> None:
    conflicts = [
        {
            "path": f"{'p' * 900}/{i}",
            "holder_path": f"{'p' * 900}/{i}",
            "holder_issue": "P-1",
            "holder_session_id": f"s-{i}",
            "holder_actor_key": "a" * 64,
        }
        for i in range(100)
    ]
    text = denial(SID, "P-2", conflicts, {})
    assert len(text) <= 4000
    assert "--paths <the paths above> --wait" in text and "more not shown" in text


def test_a_third_of_the_ttl_makes_a_sign_of_life_worth_a_write() -> None:
    ttl = 120
    assert not beat_due(1_000_000, 1_000_000 + 39_999_999, ttl)
    assert beat_due(1_000_000, 1_000_000 + 40_000_000, ttl)
    assert beat_due(None, 5, ttl)
    assert next_generation(None) == 1
    row = BindingRow("s-1", 4, None, 0, None, "a", 1, None)
    assert next_generation(row) == 5


@given(st.text())
def test_any_harness_session_id_has_a_fixed_size_key(harness_session_id: str) -> None:
    key = thread_of(harness_session_id)
    assert len(key) == 64 and set(key) <= set("0123456789abcdef")
    assert key == thread_of(harness_session_id)
    assert harness_session_id == "" or key != thread_of(harness_session_id + "x")
