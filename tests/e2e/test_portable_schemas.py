"""Every schema is portable: each ``pattern`` in /schema and in every MCP tool's input schema is
an ECMAScript regular expression (with and without the ``u`` flag) that accepts exactly the
names the server accepts, checked with the real Node.js."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Annotated, Any

import httpx
import msgspec
import pytest
from tests.helpers import ServerProcess

from eventcoord.mcp.tools import TOOLS

#: Names of every kind, valid and not: the server's answer for each is compared with Node's.
SAMPLES = [
    "P-1",
    "a",
    "A.b_c:d/e#f-9",
    "x" * 128,
    "x" * 129,
    "",
    "P-1\n",
    "P-1\r",
    "\nP-1",
    "P-1\n\n",
    "-P",
    ".P",
    "P 1",
    "é",
    "Pé",
    "alice\u202egnp",
    "a\u200bb",
    "issue:P-1",
    "agent:s-1",
    "project:P",
    "issue:",
    "issues:P-1",
    "issue:P-1\n",
    "default",
    "evil_",
    "w" * 64,
    "w" * 65,
    "tok_" + "0123456789abcdef01234567",
    "tok_" + "0123456789abcdef0123456",
    "tok_" + "0123456789ABCDEF01234567",
    "cmd-\U0001f600" * 40,
    "\U0001f600" * 128,
    "c-1\x00",
    "c-1\x85",
    "c-1\t",
    "Z",
    "P-1Z",
]

NODE_CHECK = r"""
const {patterns, samples} = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = {};
for (const p of patterns) {
  const row = {};
  for (const flags of ['', 'u']) {
    try {
      const re = new RegExp(p, flags);
      row[flags || 'plain'] = samples.map((s) => re.test(s));
    } catch (e) {
      row[flags || 'plain'] = 'SyntaxError: ' + e.message;
    }
  }
  out[p] = row;
}
process.stdout.write(JSON.stringify(out));
"""


def _patterns(node: Any, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            found.add(node["pattern"])
        for value in node.values():
            _patterns(value, found)
    elif isinstance(node, list):
        for value in node:
            _patterns(value, found)
    return found


def _server_accepts(pattern: str, sample: str) -> bool:
    """What the server does with a string under this pattern: msgspec's own validation."""
    try:
        msgspec.json.decode(json.dumps(sample).encode(), type=Annotated[str, msgspec.Meta(pattern=pattern)])
    except msgspec.ValidationError:
        return False
    return True


def _node(patterns: list[str]) -> dict[str, dict[str, Any]]:
    node = shutil.which("node")
    assert node is not None, "Node.js is part of this machine (the schema is checked with it)"
    run = subprocess.run(
        [node, "-e", NODE_CHECK],
        input=json.dumps({"patterns": patterns, "samples": SAMPLES}),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, dict[str, Any]] = json.loads(run.stdout)
    return result


def _check(patterns: set[str]) -> None:
    assert patterns, "the schema publishes name patterns"
    node = _node(sorted(patterns))
    for pattern in sorted(patterns):
        server = [_server_accepts(pattern, s) for s in SAMPLES]
        assert any(server) and not all(server), pattern  # the samples do tell it apart
        for flags in ("plain", "u"):
            assert node[pattern][flags] == server, (pattern, flags, node[pattern][flags], server)


@pytest.mark.sqlite
def test_every_openapi_pattern_is_ecmascript_accepting_what_the_server_accepts(server: ServerProcess) -> None:
    r = httpx.get(server.base_url + "/schema/openapi.json", timeout=30)
    assert r.status_code == 200
    _check(_patterns(r.json(), set()))


def test_every_mcp_input_pattern_is_ecmascript_accepting_what_the_server_accepts() -> None:
    _check(_patterns([tool.input_schema for tool in TOOLS], set()))


def test_the_server_refuses_a_trailing_newline_under_the_published_patterns() -> None:
    for pattern in _patterns([tool.input_schema for tool in TOOLS], set()):
        assert not _server_accepts(pattern, "P-1\n") and not _server_accepts(pattern, "tok_" + "0" * 24 + "\n")
