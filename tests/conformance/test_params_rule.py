"""The params rule, host side (docs/protocol.md, Params): a real host checks a task's params
against the action's whole params_schema (JSON Schema Draft 2020-12) before dispatch.

The three conformance agents (Python, Go, TypeScript) run under one host and declare the same
action ``checked`` (its schema: one property per case of params_rule.json). For every keyword,
params that break it are refused by the host with INVALID_ARGUMENT (reason INVALID_PARAMS) --
a gRPC error, not a task the agent failed -- the same way whatever the agent's language; params
that satisfy it reach the agent, which returns them. vectors/params_rule.json is the adapter side:
there only the shape (type, required) is refused, the rest reaches the handler.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from jsonschema import Draft202012Validator

from ether.v1 import agent_io_pb2, common_pb2
from tests.support.agents import deploy
from tests.support.calls import data, details, execute
from tests.support.host import HostProcess

from .make_vectors import checked_schema, params_rule_declaration

HERE = Path(__file__).resolve().parent
DECLARATION = params_rule_declaration()
ACTION: str = DECLARATION["action"]
CASES: list[dict[str, Any]] = DECLARATION["cases"]
LANGUAGES: dict[str, dict[str, Any]] = {
    "python": {"language": common_pb2.LANGUAGE_PYTHON, "module": "agent"},
    "go": {"language": common_pb2.LANGUAGE_GO},
    "typescript": {"language": common_pb2.LANGUAGE_TYPESCRIPT},
}


def _case_id(case: dict[str, Any]) -> str:
    return str(case["property"])


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_each_case_breaks_its_keyword_and_only_it(case: dict[str, Any]) -> None:
    """The declaration means what it says: every ``breaks`` value fails the schema at its
    keyword (Draft 2020-12, as the host checks it); every ``satisfies`` value passes."""
    validator = Draft202012Validator(checked_schema(DECLARATION))
    for value in case["breaks"]:
        errors = list(validator.iter_errors({case["property"]: value}))
        assert errors, f"{value!r} should break {case['keyword']}"
        for error in errors:
            assert case["keyword"] in list(error.schema_path)[2:], (value, error.message)
    for value in case["satisfies"]:
        assert not list(validator.iter_errors({case["property"]: value})), value


@pytest.fixture(scope="module")
def agents(host: HostProcess) -> dict[str, str]:
    """The three conformance agents, deployed from their folders; language -> agent name."""
    return {
        language: deploy(host, HERE / "agents" / language, name=f"conformance-{language}", **spec)
        for language, spec in LANGUAGES.items()
    }


def _refusal(host: HostProcess, agent: str, params: dict[str, Any]) -> tuple[str, list[str]]:
    """How the host refused the task: (reason, fields of the violations)."""
    with pytest.raises(grpc.RpcError) as caught:
        output = execute(host, agent, ACTION, params)
        pytest.fail(f"{agent} got {params!r} (status {output.status}, error {output.error})")
    error = caught.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    found = details(error)
    fields = (
        [v.field for v in found["BadRequest"].field_violations] if "BadRequest" in found else []
    )
    return found["ErrorInfo"].reason, fields


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_host_refuses_what_breaks_a_keyword_and_passes_the_rest(
    host: HostProcess, agents: dict[str, str], case: dict[str, Any]
) -> None:
    """Breaks: INVALID_ARGUMENT before dispatch, identical for the three languages.
    Satisfies: the task reaches the agent in each language and comes back unchanged."""
    prop = case["property"]
    for value in case["breaks"]:
        params = {prop: value}
        refusals = {language: _refusal(host, agent, params) for language, agent in agents.items()}
        reasons = {reason for reason, _ in refusals.values()}
        assert reasons == {"INVALID_PARAMS"}, refusals
        assert len({tuple(fields) for _, fields in refusals.values()}) == 1, refusals
    for value in case["satisfies"]:
        params = {prop: value}
        for language, agent in agents.items():
            output = execute(host, agent, ACTION, params)
            assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, (language, output.error)
            assert data(output) == params, language
