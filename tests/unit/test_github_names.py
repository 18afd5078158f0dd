"""The GitHub mirror's names: which GitHub issue a key is, logins files, the memory's channel
and records, and text that cannot break out of the code it is quoted in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventcoord.github import memory as mem
from eventcoord.github.names import Logins, LoginsError, is_repo, issue_number, memory_channel, parse_logins
from eventcoord.github.texts import block, code
from eventcoord.sanitize import is_channel


@pytest.mark.parametrize(
    ("key", "number"),
    [("P-123", 123), ("repo#7", 7), ("team/api#42", 42), ("P-0", None), ("refactor", None), ("P-12a", None)],
)
def test_a_key_ending_in_hash_or_dash_n_is_github_issue_n(key: str, number: int | None) -> None:
    assert issue_number(key) == number


def test_repositories_are_owner_slash_name() -> None:
    assert is_repo("acme/widgets") and is_repo("a-b/c_d.e")
    assert not any(is_repo(r) for r in ("acme", "acme/", "/w", "acme/w/x", "-acme/w", "acme/..", "acme/w x"))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[1]", "not a JSON object of strings but an array"),
        ('"alice"', "but a string"),
        ('{"alice": 3}', "the value of 'alice' is not a string but a number"),
        ('{"alice": null}', "but null"),
        ('{"alice": "--remove-label"}', "is not a GitHub login"),
        ("{", "not JSON"),
    ],
)
def test_a_logins_file_that_is_not_an_object_of_logins_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(LoginsError, match=problem):
        parse_logins(text)


def test_logins_match_the_actor_key_then_its_name_and_holds_carry_their_own() -> None:
    logins = parse_logins('{"claude": "claude-bot", "claude:thread-1:h": "alice", "bob": "bob-gh"}')
    assert logins.login_of("claude:thread-1:h") == "alice"
    assert logins.login_of("claude:thread-2:h") == "claude-bot"
    assert logins.login_of("bob") == "bob-gh"
    assert logins.login_of("github:dana") == "dana"
    assert Logins().login_of("carol") is None


def test_the_memory_channel_is_a_valid_channel_one_per_repository_whatever_its_case() -> None:
    assert memory_channel("Acme/Widgets") == memory_channel("acme/widgets") == "project:github/acme/widgets"
    odd = memory_channel("acme/my_repo")
    assert is_channel(odd) and odd != memory_channel("acme/my-repo")


def test_records_round_trip_and_other_messages_are_not_records() -> None:
    record = mem.Added(seq=3, n=12, label="WIP")
    assert mem.decode(mem.encode(record)) == record
    assert mem.decode("hello") is None and mem.decode('{"op":"unknown","seq":1}') is None
    assert mem.trusted(None, "token:admin") and mem.trusted(None, "token:human")
    assert not mem.trusted(None, "token:agent") and not mem.trusted("s-1", "token:admin")


@given(st.text())
def test_quoted_text_cannot_close_its_code_span_or_block(text: str) -> None:
    span = code(text)
    fence = span[: len(span) - len(span.lstrip("`"))]
    assert fence not in span[len(fence) : -len(fence)]
    b = block(text)
    opening = b.split("text\n", 1)[0]
    assert all(not line.startswith(opening) for line in text.split("\n"))
