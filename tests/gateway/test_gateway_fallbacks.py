"""When the gateway has to fall back: a session whose only agent is gone, and egress rules that
come from more than one place.

- A user turn on a session whose serving agent was stopped (or went FATAL), with no other agent
  able to take it, ends with an ``error`` ``no_agent_available`` and ``turn_completed``; the
  session is kept, and answers again once its agent runs again.
- An agent's egress policy is the host's ``[gateway.egress]`` defaults, then its deployment's
  ``egress`` config, then the host's ``[gateway.egress.agents.<name>]``, later keys winning:
  an operator's per-agent section overrides what the deployment asked for, and every agent
  without one gets the deployment's rules over the host's defaults.

Every fetch goes to HTTP servers on loopback started by the tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ether.v1 import agent_io_pb2, gateway_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, until, watch_until
from tests.support.calls import data, struct
from tests.support.host import HostProcess, sandbox_grants

from ._support import (
    Conversation,
    Recorder,
    audit_of,
    fetch,
    kinds,
    of,
    open_session,
    reply_text,
)

ALLOWED, DENIED = gateway_pb2.AUDIT_DECISION_ALLOWED, gateway_pb2.AUDIT_DECISION_DENIED
NARROW, WIDE, PLAIN = "fetch-narrow", "fetch-wide", "fetch-plain"
HOST_CAP, AGENT_CAP = 1000, 2000  # max_response_bytes: host default, and NARROW's own section
# A path whose answer ("hello from /mid...") lies between the two caps.
MIDDLE = "/mid" + "m" * 1500
MIDDLE_BYTES = len("hello from " + MIDDLE)


# -- no agent to serve the session -----------------------------------------------------------


def _no_agent_turn(events: list[gateway_pb2.ConverseResponse]) -> None:
    """The documented shape of a turn nobody could answer."""
    assert kinds(events) == ["accepted", "error", "turn_completed"], [
        (e.WhichOneof("event"), e) for e in events
    ]
    [error] = of(events, "error")
    assert error.error.code == "no_agent_available", error
    assert len({e.turn for e in events}) == 1


def _start_again(host: HostProcess, agent: str) -> None:
    started = host.supervisor.StartAgent(supervisor_pb2.StartAgentRequest(name=agent), timeout=30)
    until(host, started.agent, {"RUNNING"})


def test_a_stopped_lone_agent_gives_no_agent_available(host: HostProcess) -> None:
    """The only agent of a session is stopped: the user's next message is answered with
    `no_agent_available` and the turn still completes; the session, its context and its event
    numbering survive, and once the agent is started again the conversation goes on with it."""
    lone = deploy(host, AGENTS / "chatter", name="lone-stopped", capabilities=["lone-stopped"])
    session = open_session(host, capability="lone-stopped", context={"user": "ada"})
    assert session.agent == lone
    talk = Conversation(host, session.id)
    first = talk.turn("hello")
    assert reply_text(first) == f"{lone} heard: hello"

    stopped = host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name=lone), timeout=30)
    until(host, stopped.agent, {"STOPPED"})
    refused = talk.turn("anyone there?")
    _no_agent_turn(refused)

    _start_again(host, lone)
    answered = talk.turn("back again")
    talk.close()
    assert reply_text(answered) == f"{lone} heard: back again"
    assert not of(first + refused + answered, "agent_failover")
    everything = first + refused + answered
    assert [e.sequence for e in everything] == list(range(1, len(everything) + 1))
    assert [e.turn for e in (first[0], refused[0], answered[0])] == [1, 2, 3]
    got = host.gateway.GetSession(
        gateway_pb2.GetSessionRequest(session_id=session.id), timeout=10
    ).session
    assert got.state == gateway_pb2.SESSION_STATE_OPEN and got.agent == lone
    context = host.gateway.GetContext(
        gateway_pb2.GetContextRequest(session_id=session.id), timeout=10
    )
    assert context.context["user"] == "ada"


def test_a_fatal_lone_agent_gives_no_agent_available(host: HostProcess) -> None:
    """The only agent of a session crashes and is not restarted (FATAL): the turn that killed it
    reports the crash, the next one `no_agent_available`; started again, it answers."""
    lone = deploy(
        host,
        AGENTS / "chatter",
        name="lone-fatal",
        capabilities=["lone-fatal"],
        max_restarts=0,  # the first death is one restart too many: FATAL
    )
    talk = Conversation(host, open_session(host, capability="lone-fatal").id)
    crashed = talk.turn("crash")
    assert [e.error.code for e in of(crashed, "error")] == ["agent_crashed"]
    watch_until(host, lone, {"FATAL"})

    refused = talk.turn("anyone there?")
    _no_agent_turn(refused)

    _start_again(host, lone)
    answered = talk.turn("back again")
    talk.close()
    assert reply_text(answered) == f"{lone} heard: back again"
    assert not of(crashed + refused + answered, "agent_failover")


# -- egress policy layers --------------------------------------------------------------------


@pytest.fixture(scope="module")
def other_port() -> Iterator[Recorder]:
    """A second loopback server: another port, which only some policies allow."""
    server = Recorder()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh_paths(web: Recorder, other_port: Recorder) -> None:
    web.paths.clear()
    other_port.paths.clear()


@pytest.fixture(scope="module")
def layered(
    tmp_path_factory: pytest.TempPathFactory, web: Recorder, other_port: Recorder
) -> Iterator[HostProcess]:
    """A host whose config sets egress defaults for every agent (loopback, small responses)
    and a section of its own for NARROW (GET only, one port, a cap of its own)."""
    folder = tmp_path_factory.mktemp("layered")
    config = folder / "ether.toml"
    config.write_text(
        sandbox_grants()
        + "\n[gateway.egress]\n"
        + 'allow_hosts = ["127.0.0.1"]\n'
        + 'allow_addresses = ["127.0.0.1/32"]\n'
        + "burst = 100\n"
        + f"max_response_bytes = {HOST_CAP}\n"
        + f"\n[gateway.egress.agents.{NARROW}]\n"
        + 'allow_methods = ["GET"]\n'
        + f"allow_ports = [{web.port}]\n"
        + f"max_response_bytes = {AGENT_CAP}\n"
    )
    process = HostProcess(folder / "state", env={"ETHER_CONFIG": str(config)})
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def agents(layered: HostProcess, web: Recorder, other_port: Recorder) -> dict[str, str]:
    """NARROW and WIDE deployed with the same generous egress config; PLAIN with none."""
    generous = {
        "allow_methods": ["GET", "POST"],
        "allow_ports": [web.port, other_port.port],
        "max_response_bytes": 100_000,
    }
    names = {}
    for name in (NARROW, WIDE):
        names[name] = deploy(
            layered, AGENTS / "toolbox", name=name, config=struct({"egress": generous})
        )
    names[PLAIN] = deploy(layered, AGENTS / "toolbox", name=PLAIN)
    return names


def answered(output: agent_io_pb2.AgentOutput) -> dict[str, Any]:
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    result: dict[str, Any] = data(output)
    assert result["status"] == 200
    return result


def refused(output: agent_io_pb2.AgentOutput, code: str) -> None:
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR, data(output)
    assert output.error.code == code, output.error.message


def test_the_hosts_per_agent_section_overrides_the_deployment(
    layered: HostProcess, agents: dict[str, str], web: Recorder, other_port: Recorder
) -> None:
    """The operator narrowed NARROW in the host config: POST, the other port and a response
    over its own cap are refused although its deployment allows them, each refusal audited
    with its reason; what its section does not name (the loopback host) still comes from the
    host's defaults, and its own cap, not the host default, bounds the responses."""
    agent = agents[NARROW]
    assert answered(fetch(layered, agent, web.url("/hello")))["text"] == "hello from /hello"
    middle = answered(fetch(layered, agent, web.url(MIDDLE)))
    assert HOST_CAP < len(middle["text"]) == MIDDLE_BYTES <= AGENT_CAP
    refused(
        fetch(layered, agent, web.url("/submit"), method="POST", body="x"), "method_not_allowed"
    )
    refused(fetch(layered, agent, other_port.url("/hello")), "port_not_allowed")
    refused(fetch(layered, agent, web.url("/big")), "response_too_large")
    assert web.paths == [("GET", "/hello"), ("GET", MIDDLE), ("GET", "/big")]
    assert other_port.paths == []
    records = audit_of(layered, agent)
    assert [(r.decision, r.reason, r.method, r.port) for r in records] == [
        (ALLOWED, "allowed", "GET", web.port),
        (ALLOWED, "allowed", "GET", web.port),
        (DENIED, "method_not_allowed", "POST", web.port),
        (DENIED, "port_not_allowed", "GET", other_port.port),
        (DENIED, "response_too_large", "GET", web.port),
    ]
    assert records[-1].response_bytes > AGENT_CAP


def test_without_a_section_the_deployment_overrides_the_host_defaults(
    layered: HostProcess, agents: dict[str, str], web: Recorder, other_port: Recorder
) -> None:
    """WIDE, deployed with the same config as NARROW but with no section in the host config,
    gets what its deployment asks for (POST, both ports, large responses) on top of the
    host's defaults (the loopback host)."""
    agent = agents[WIDE]
    posted = answered(fetch(layered, agent, web.url("/submit"), method="POST", body="payload"))
    assert posted["text"] == "hello from /submit got payload"
    assert answered(fetch(layered, agent, other_port.url("/there")))["text"] == "hello from /there"
    assert len(answered(fetch(layered, agent, web.url("/big")))["text"]) == 5000
    assert web.paths == [("POST", "/submit"), ("GET", "/big")]
    assert other_port.paths == [("GET", "/there")]
    assert [(r.decision, r.reason, r.method) for r in audit_of(layered, agent)] == [
        (ALLOWED, "allowed", "POST"),
        (ALLOWED, "allowed", "GET"),
        (ALLOWED, "allowed", "GET"),
    ]


def test_an_agent_that_asks_nothing_gets_the_host_defaults(
    layered: HostProcess, agents: dict[str, str], web: Recorder, other_port: Recorder
) -> None:
    """PLAIN has no egress config and no section: the host's defaults alone apply, so it may
    fetch from loopback on any port, with the default methods (GET, HEAD) and the host's
    response cap."""
    agent = agents[PLAIN]
    assert answered(fetch(layered, agent, web.url("/hello")))["text"] == "hello from /hello"
    assert answered(fetch(layered, agent, other_port.url("/there")))["text"] == "hello from /there"
    refused(
        fetch(layered, agent, web.url("/submit"), method="POST", body="x"), "method_not_allowed"
    )
    refused(fetch(layered, agent, web.url(MIDDLE)), "response_too_large")
    assert web.paths == [("GET", "/hello"), ("GET", MIDDLE)]
    assert other_port.paths == [("GET", "/there")]
    assert [(r.decision, r.reason) for r in audit_of(layered, agent)] == [
        (ALLOWED, "allowed"),
        (ALLOWED, "allowed"),
        (DENIED, "method_not_allowed"),
        (DENIED, "response_too_large"),
    ]
