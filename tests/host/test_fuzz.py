"""Fuzzing every RPC: requests generated from the descriptors, and raw garbage bytes.

Every answer is a canonical status with a message a person can act on -- never UNKNOWN, never
INTERNAL, never a stall past the deadline of a call that does not wait by design -- and the host
lives through all of it, serving a health check after every example and logging no crash.

Bounded for `make test`: ETHER_FUZZ_EXAMPLES examples per method (default 12) and derandomized,
so a failure here reproduces; ETHER_FUZZ_RANDOM=1 draws new examples (`make chaos` runs many
more through ``python -m tests.support.fuzz``).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.descriptor import MethodDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ether.v1 import terminal_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, execute
from tests.support.fuzz import (
    ECHO_AGENT,
    NEVER,
    Answer,
    call,
    check,
    methods,
    path_of,
    requests,
)
from tests.support.host import HostProcess

EXAMPLES = int(os.environ.get("ETHER_FUZZ_EXAMPLES", "12"))
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=os.environ.get("ETHER_FUZZ_RANDOM") != "1",
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
METHODS = methods()


@pytest.fixture(scope="module")
def fuzz_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HostProcess, str]]:
    """A host whose terminals may run only `cat` (random argv never runs a random program),
    an echo agent Execute calls can reach, and one terminal that WriteInput calls can reach."""
    state = tmp_path_factory.mktemp("fuzz-state")
    config = Path(state) / "ether.toml"
    config.write_text('[terminals]\nallow_commands = ["cat"]\n')
    host = HostProcess(state / "state", "--config", str(config))
    try:
        host.wait_serving()
        deploy(host, AGENTS / "worker", name=ECHO_AGENT)
        deploy(host, AGENTS / "rogue")
        terminal = host.terminals.CreateTerminal(
            terminal_pb2.CreateTerminalRequest(argv=terminal_pb2.Argv(args=["cat"])), timeout=30
        ).terminal
        yield host, terminal.id
    finally:
        host.stop()


def _healthy(host: HostProcess) -> None:
    health = health_pb2_grpc.HealthStub(host.channel)
    answer = health.Check(health_pb2.HealthCheckRequest(), timeout=15)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


def _no_crash(host: HostProcess, since: int) -> None:
    crashed = [r for r in host.records[since:] if r.get("level") in ("error", "critical")]
    assert not crashed, f"the host logged errors: {crashed[:3]}"


@pytest.mark.parametrize("method", METHODS, ids=path_of)
def test_generated_requests(fuzz_host: tuple[HostProcess, str], method: MethodDescriptor) -> None:
    host, terminal_id = fuzz_host
    hints = {"agent": [ECHO_AGENT], "terminal_id": [terminal_id]}
    seen: list[Answer] = []
    since = len(host.records)

    @FUZZ_SETTINGS
    @given(requests(method, hints))
    def run(messages: list[object]) -> None:
        answer = call(host.channel, method, messages)
        seen.append(answer)
        assert check(method, answer) is None, check(method, answer)
        _healthy(host)

    run()
    _no_crash(host, since)
    assert seen


@pytest.mark.parametrize("method", METHODS, ids=path_of)
def test_garbage_bytes(fuzz_host: tuple[HostProcess, str], method: MethodDescriptor) -> None:
    """Bytes that are mostly not protobuf: INVALID_ARGUMENT, or whatever the request they
    happen to decode to deserves -- never a crash."""
    host, _ = fuzz_host
    since = len(host.records)

    @settings(FUZZ_SETTINGS, max_examples=max(3, EXAMPLES // 3))
    @given(st.lists(st.binary(min_size=1, max_size=120), min_size=1, max_size=2))
    def run(chunks: list[bytes]) -> None:
        answer = call(host.channel, method, chunks, raw=True)
        assert check(method, answer) is None, check(method, answer)
        assert answer.code != grpc.StatusCode.UNIMPLEMENTED

    run()
    _healthy(host)
    _no_crash(host, since)


def _frames() -> st.SearchStrategy[bytes]:
    """Lines that look like the link's frames, with fields of the wrong kind or missing (never
    ``fatal``: an agent that declares itself fatal is stopped on purpose)."""
    kinds = st.sampled_from(["result", "progress", "log", "call", "pong", "cancel", "x", ""])
    values = st.one_of(
        st.none(), st.integers(), st.text(max_size=8), st.lists(st.integers(), max_size=2)
    )
    frame = st.fixed_dictionaries(
        {"type": kinds},
        optional={
            "id": st.one_of(st.sampled_from(["h-1", "h-2", "c-1", ""]), values),
            "status": st.one_of(st.sampled_from(["ok", "error"]), values),
            "result": values,
            "error": values,
            "method": values,
            "params": values,
        },
    )
    return frame.map(lambda f: json.dumps(f).encode())


def test_random_bytes_on_an_agents_stdout(fuzz_host: tuple[HostProcess, str]) -> None:
    """The frame reader gets random bytes and broken frames from a real agent's stdout, in one
    write or a byte at a time: every task still ends with a canonical answer, the agent's next
    task and another agent's work, and the host logs no crash."""
    host, _ = fuzz_host
    since = len(host.records)
    noise = st.lists(st.one_of(st.binary(max_size=200), _frames()), min_size=1, max_size=4)

    @FUZZ_SETTINGS
    @given(noise.map(b"\n".join), st.sampled_from([0, 1, 7]))
    def run(spew: bytes, chunk: int) -> None:
        params = {"b64": base64.b64encode(spew).decode(), "chunk": chunk}
        try:
            execute(host, "rogue", "spew", params, timeout=30)
        except grpc.RpcError as error:
            assert error.code() not in NEVER, error.details()
        assert data(execute(host, ECHO_AGENT, "echo", {"after": "spew"})) == {"after": "spew"}

    run()
    assert data(execute(host, "rogue", "echo", {"n": 1}, timeout=60)) == {"n": 1}
    _no_crash(host, since)
