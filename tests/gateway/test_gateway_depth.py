"""What a client gives OpenSession and the gateway keeps to show back -- a session's `metadata`,
a pipeline step's `params` -- nests at most as deep as a protobuf Struct can carry to a client
(docs/limits.md, "Gateway"), as the context does (tests/gateway/test_context.py). Real host,
the chatter agent, real gRPC clients."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import details, nested, struct
from tests.support.host import HostProcess

from ._support import open_session

# Under a key of an object, 43 lists take 3 + 86 protobuf levels, 44 lists 91: past the 90 a
# Struct may nest. The deepest a client's protobuf (upb, as the host's) builds and sends: 49
# lists in the metadata, 48 in a step's params, a message deeper in the request (one more list
# raises DecodeError in the client itself).
FITS, TOO_DEEP, DEEPEST_METADATA, DEEPEST_PARAMS = 43, 44, 49, 48


@pytest.fixture(scope="module")
def chatter(host: HostProcess) -> str:
    return deploy(host, AGENTS / "chatter")


def _sessions(host: HostProcess) -> list[gateway_pb2.Session]:
    request = gateway_pb2.ListSessionsRequest(page_size=1000)
    return list(host.gateway.ListSessions(request, timeout=10).sessions)


def _get(host: HostProcess, session_id: str) -> gateway_pb2.Session:
    request = gateway_pb2.GetSessionRequest(session_id=session_id)
    response: gateway_pb2.GetSessionResponse = host.gateway.GetSession(request, timeout=10)
    return response.session


def _plain(message: Any) -> Any:
    return json_format.MessageToDict(message)


def _pipeline(params: dict[str, Any]) -> gateway_pb2.PipelineSpec:
    step = gateway_pb2.PipelineStep(name="first", agent="chatter", params=struct(params))
    return gateway_pb2.PipelineSpec(steps=[step])


def test_metadata_nesting_deeper_than_a_struct_carries_is_refused(
    host: HostProcess, chatter: str
) -> None:
    """docs/limits.md, "Gateway": GetSession and ListSessions show a session's metadata as a
    Struct, so OpenSession refuses metadata nesting past 90 protobuf levels -- 44 lists under a
    key, and 49, the deepest a client can send -- INVALID_ARGUMENT `INVALID_FIELD` with a field
    violation on `metadata`, and opens no session. 43 lists are kept and shown back whole.
    (Before, the session opened, and every answer showed a `not_shown` note in place of its
    metadata.)"""
    kept = open_session(host, agent=chatter, metadata=struct({"deep": nested(FITS)}))
    for shown in (kept, _get(host, kept.id), *(s for s in _sessions(host) if s.id == kept.id)):
        assert _plain(shown.metadata) == {"deep": nested(FITS)}
    before = {s.id for s in _sessions(host)}

    for levels in (TOO_DEEP, DEEPEST_METADATA):
        with pytest.raises(grpc.RpcError) as error:
            open_session(host, agent=chatter, metadata=struct({"deep": nested(levels)}))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
        info = details(error.value)["ErrorInfo"]
        assert (info.reason, dict(info.metadata)) == ("INVALID_FIELD", {"limit": "90"})
        violations = details(error.value)["BadRequest"].field_violations
        assert [v.field for v in violations] == ["metadata"]
        assert {s.id for s in _sessions(host)} == before


def test_pipeline_step_params_nesting_deeper_than_a_struct_carries_are_refused(
    host: HostProcess, chatter: str
) -> None:
    """docs/limits.md, "Gateway": GetSession shows the session's pipeline with each step's
    params as a Struct, so OpenSession refuses params nesting past 90 protobuf levels (44
    lists under a key; 48, the deepest a client can send there) as an invalid pipeline naming
    the step's `params`, and opens no session. 43 lists are kept and shown back whole."""
    kept = open_session(host, agent=chatter, pipeline=_pipeline({"deep": nested(FITS)}))
    for shown in (kept, _get(host, kept.id)):
        assert _plain(shown.pipeline.steps[0].params) == {"deep": nested(FITS)}
    before = {s.id for s in _sessions(host)}

    for levels in (TOO_DEEP, DEEPEST_PARAMS):
        with pytest.raises(grpc.RpcError) as error:
            open_session(host, agent=chatter, pipeline=_pipeline({"deep": nested(levels)}))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
        assert details(error.value)["ErrorInfo"].reason == "INVALID_PIPELINE"
        violations = details(error.value)["BadRequest"].field_violations
        assert [v.field for v in violations] == ["pipeline.steps[0].params"]
        assert {s.id for s in _sessions(host)} == before
