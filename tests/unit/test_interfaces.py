"""The faces of eventcoord are generated from one table: the typed client's module is current, and
every command reaches the client, the CLI and the MCP tools with the same fields."""

from __future__ import annotations

import inspect

import msgspec
import pytest

from eventcoord import errors
from eventcoord.client import AsyncClient, Client, gen
from eventcoord.client.operations import BY_NAME, OPERATIONS, read_request
from eventcoord.commands import COMMAND_TYPES


def test_the_generated_client_module_is_up_to_date() -> None:
    # Fails when a command or read struct changed and `python -m eventcoord.client.gen` was not run.
    for name, text in gen.generate().items():
        assert (gen.PACKAGE / name).read_text() == text, name
    assert gen.main(["--check"]) == 0


@pytest.mark.parametrize("tag", sorted(COMMAND_TYPES))
def test_each_command_is_a_typed_method_with_the_structs_fields(tag: str) -> None:
    struct = COMMAND_TYPES[tag]
    for cls in (Client, AsyncClient):
        method = getattr(cls, tag)
        params = inspect.signature(method).parameters
        assert set(params) - {"self"} == set(struct.__struct_fields__), (cls, tag)
        assert inspect.iscoroutinefunction(method) is (cls is AsyncClient)
        required = {n for n, p in params.items() if p.default is inspect.Parameter.empty and n != "self"}
        assert required == {f.name for f in BY_NAME[tag].fields() if f.required}
    assert BY_NAME[tag].result.__name__ != "CommandResult", f"{tag} has no typed result struct"


def test_each_tool_schema_is_the_command_struct_without_its_tag() -> None:
    from eventcoord.mcp.tools import TOOLS

    tools = {t.name: t for t in TOOLS}
    for op in OPERATIONS:
        schema = tools[op.name].input_schema
        wire = {f.encode_name for f in op.fields()}
        assert set(schema["properties"]) == wire, op.name
        assert schema["additionalProperties"] is False
        assert op.session_field not in schema["required"]
        assert tools[op.name].description


def test_reads_build_their_url_from_path_fields_and_leave_defaults_out() -> None:
    from eventcoord.client import reads

    assert read_request(BY_NAME["get_issue_state"], reads.GetIssueState(issue="team/P#1", as_="s-1")) == (
        "/v1/issues/team/P%231/state",
        {"as": "s-1"},
    )
    assert read_request(BY_NAME["list_agents"], reads.ListAgents()) == ("/v1/agents", {})


def test_refusals_map_to_their_family_and_are_exported_from_the_client() -> None:
    import eventcoord.client as client

    cases = {
        "ISSUE_HELD": client.Contended,
        "FILES_CLAIMED": client.Contended,
        "NOT_FRESH_HOLDER": client.NotCurrent,
        "SESSION_NOT_LIVE": client.NotCurrent,
        "VALIDATION": client.InvalidRequest,
        "FORBIDDEN": client.AccessDenied,
        "CONCURRENCY": client.Retryable,
        "NOT_FOUND": client.NotFound,
        "ARCHIVED": client.Refused,
        "SOMETHING_NEW": client.Refused,
    }
    for code, family in cases.items():
        e = errors.refusal(code, "m", {"k": 1})
        assert type(e) is family and (e.code, e.message, e.details) == (code, "m", {"k": 1})
        assert isinstance(e, client.Refused) and isinstance(e, errors.EventCoordError)
    # One class each: the client's names are the ones eventcoord.errors defines (SPEC's name).
    assert client.Refused is errors.Refused and client.Contended is errors.Contended
    assert client.Unreachable is errors.Unreachable
    with pytest.raises(AttributeError):
        client.NoSuchThing  # noqa: B018


def test_error_codes_are_listed_once_and_the_client_families_come_from_them() -> None:
    """Every code names its family in ErrorCode; a family's class answers exactly its codes."""
    by_family = {cls.family: cls for cls in errors.FAMILIES}
    assert set(by_family) == set(errors.Family) - {errors.Family.OTHER}
    for code in errors.ErrorCode:
        expected = by_family.get(code.family, errors.Refused)
        assert type(errors.refusal(code.value, "m")) is expected, code
        assert (code.value in expected.codes) == (code.family is not errors.Family.OTHER)
    assert errors.Refused.codes == frozenset()
    assert errors.Contended.codes >= {"ISSUE_HELD", "FILES_CLAIMED", "LEASE_HELD", "DEADLOCK"}


def test_results_ignore_fields_they_do_not_know() -> None:
    from eventcoord.client import results

    decoded = msgspec.json.decode(b'{"issue":"P-1","fencing_token":3,"new_field":true}', type=results.ClaimIssueResult)
    assert decoded.fencing_token == 3
