"""``dev.py``: ``serve`` installs the runtime only; ``test`` and ``lint`` the test tools too,
and the install stamp knows which of the two is in ``.venv``."""

from __future__ import annotations

import re
import tomllib

import dev
from tests.helpers import ROOT

TEST_TOOLS = ("pytest", "playwright", "schemathesis", "mypy", "ruff", "hypothesis")


def names(requirements: list[str]) -> set[str]:
    """The distribution names of PEP 508 requirements (``mcp>=2.3,<3`` -> ``mcp``)."""
    return {re.split(r"[\s\[;<>=!~]", r, maxsplit=1)[0].lower() for r in requirements}


def test_serve_installs_the_runtime_only_and_test_and_lint_the_test_tools() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime, extra = names(project["dependencies"]), names(project["optional-dependencies"]["test"])
    # The heavy tools are test extras, never runtime dependencies ...
    assert set(TEST_TOOLS) <= extra and not set(TEST_TOOLS) & runtime
    # ... and serve asks for the checkout without them, test and lint with them.
    assert dev.requirement(dev.EXTRAS["serve"]) == str(ROOT)
    for command in ("test", "lint"):
        assert dev.requirement(dev.EXTRAS[command]) == f"{ROOT}[test]"


def test_the_stamp_reinstalls_exactly_when_a_command_needs_more_or_pyproject_changed() -> None:
    runtime, full = dev.stamp_text("d1", dev.EXTRAS["serve"]), dev.stamp_text("d1", dev.EXTRAS["test"])
    # Nothing installed yet: every command installs.
    assert not any(dev.installed(None, "d1", extras) for extras in dev.EXTRAS.values())
    # After `dev.py serve`: serve again installs nothing; test and lint add the test tools.
    assert dev.installed(runtime, "d1", dev.EXTRAS["serve"])
    assert not dev.installed(runtime, "d1", dev.EXTRAS["test"])
    assert not dev.installed(runtime, "d1", dev.EXTRAS["lint"])
    # After `dev.py test`: every command finds what it needs.
    assert all(dev.installed(full, "d1", extras) for extras in dev.EXTRAS.values())
    # pyproject.toml changed: every command reinstalls.
    assert not any(dev.installed(stamp, "d2", extras) for stamp in (runtime, full) for extras in dev.EXTRAS.values())
    # A stamp an older dev.py wrote (the digest alone, after installing the test extras) serves serve.
    assert dev.installed("d1", "d1", dev.EXTRAS["serve"])
