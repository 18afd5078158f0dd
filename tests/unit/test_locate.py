"""Finding the server (docs/protocol.md#clients): flags, then the environment, then the local data folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventcoord.client.locate import DEFAULT_URL, locate


@pytest.fixture(autouse=True)
def no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EVENTCOORD_URL", "EVENTCOORD_TOKEN", "EVENTCOORD_BOOTSTRAP_TOKEN", "EVENTCOORD_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)


def folder_with_token(root: Path, token: str) -> Path:
    (root / ".eventcoord").mkdir(parents=True)
    (root / ".eventcoord" / "admin-token").write_text(token + "\n")
    return root


def test_flags_win_over_the_environment_which_wins_over_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = folder_with_token(tmp_path, "from-file")
    assert locate(start=here) == type(locate(start=here))(
        DEFAULT_URL, "from-file", str(here / ".eventcoord" / "admin-token")
    )
    monkeypatch.setenv("EVENTCOORD_BOOTSTRAP_TOKEN", "from-bootstrap")
    assert locate(start=here).token == "from-bootstrap"
    monkeypatch.setenv("EVENTCOORD_TOKEN", "from-env")
    monkeypatch.setenv("EVENTCOORD_URL", "http://elsewhere:1/")
    target = locate(start=here)
    assert (target.url, target.token, target.source) == ("http://elsewhere:1", "from-env", "EVENTCOORD_TOKEN")
    target = locate("http://flag:2", "from-flag", start=here)
    assert (target.url, target.token, target.source) == ("http://flag:2", "from-flag", "--token")


def test_the_folder_is_found_from_a_subdirectory_or_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = folder_with_token(tmp_path / "project", "t1")
    deep = root / "a" / "b"
    deep.mkdir(parents=True)
    assert locate(start=deep).token == "t1"
    other = folder_with_token(tmp_path / "other", "t2") / ".eventcoord"
    monkeypatch.setenv("EVENTCOORD_DATA_DIR", str(other))
    assert locate(start=deep).token == "t2"


def test_no_token_anywhere_is_an_empty_token(tmp_path: Path) -> None:
    target = locate(start=tmp_path)
    assert (target.url, target.token, target.source) == (DEFAULT_URL, "", "none")
