"""A caller's regex runs in linear time (RE2): a catastrophic pattern neither freezes the host
nor overruns its wait; patterns RE2 cannot run, and overlong ones, are INVALID_ARGUMENT."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.terminals.support import close, create, error_details, wait, wait_screen

SHOWN = "a" * 37 + "!"  # `(a+)+$` backtracks 2**37 times on this with Python's re
EVIL = r"(a+)+$"
WAIT = 1.0  # the WaitFor's own timeout
SLACK = 20.0  # the gRPC deadline is WAIT + SLACK: the host's answer must come before it


def failed_wait(host: HostProcess, terminal_id: str, **condition: Any) -> grpc.RpcError:
    """A WaitFor that must end with the host's DEADLINE_EXCEEDED (a WaitForFailure in its
    details), not with the client giving up at its own deadline."""
    with pytest.raises(grpc.RpcError) as raised:
        wait(host, terminal_id, WAIT, **condition)  # gRPC deadline: WAIT + 10 s
    error = raised.value
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED, error.details()
    assert "WaitForFailure" in error_details(error), "the client's deadline, not the host's answer"
    return error


def test_a_catastrophic_regex_times_out_normally_while_the_host_answers(
    host: HostProcess,
) -> None:
    """WaitFor `(a+)+$` on a screen and on output showing 37 a's and a `!` ends at its own
    timeout with the normal no-match outcome, while health checks and ListTerminals answer."""
    terminal = create(host, command=f"printf '{SHOWN}'; exec sleep 600")
    wait_screen(host, terminal.id, "a!")
    health = health_pb2_grpc.HealthStub(host.channel)
    conditions: list[dict[str, Any]] = [
        {"screen": pb.ScreenCondition(regex=EVIL)},
        {"output": pb.OutputCondition(regex=EVIL, after_offset=0)},
        {"output": pb.OutputCondition(regex=EVIL, after_offset=0, raw=True)},
    ]
    with ThreadPoolExecutor(len(conditions)) as pool:
        futures = [
            pool.submit(failed_wait, host, terminal.id, **condition) for condition in conditions
        ]
        answered = 0
        while not all(f.done() for f in futures) or not answered:
            check = health.Check(health_pb2.HealthCheckRequest(), timeout=WAIT + SLACK)
            assert check.status == health_pb2.HealthCheckResponse.SERVING
            listed = host.terminals.ListTerminals(pb.ListTerminalsRequest(), timeout=WAIT + SLACK)
            assert terminal.id in [t.id for t in listed.terminals]
            answered += 1
        for future in futures:
            future.result()
    found = wait(host, terminal.id, 10, screen=pb.ScreenCondition(regex=r"(a+)+!$"))
    assert found.match == SHOWN
    close(host, terminal.id)


def test_patterns_re2_cannot_run_and_overlong_ones_are_invalid_argument(
    host: HostProcess,
) -> None:
    """Backreferences, lookaround and \\Z are INVALID_ARGUMENT saying RE2 syntax is required;
    a pattern over 4 KiB is INVALID_ARGUMENT naming the limit; flags such as (?i) still work."""
    terminal = create(host, command="printf 'Hello World'; exec sleep 600")
    for pattern in (r"(a)\1", r"foo(?=bar)", r"(?<!x)y", r"end\Z"):
        with pytest.raises(grpc.RpcError) as raised:
            wait_screen(host, terminal.id, pattern, timeout=WAIT)
        error = raised.value
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (pattern, error.details())
        found = error_details(error)
        assert found["ErrorInfo"].reason == "INVALID_REGEX"
        assert found["ErrorInfo"].metadata["syntax"] == "RE2"
        assert "RE2" in found["BadRequest"].field_violations[0].description
    with pytest.raises(grpc.RpcError) as raised:
        wait_screen(host, terminal.id, "x" * 4097, timeout=WAIT)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(raised.value)["ErrorInfo"].metadata["limit"] == "4096"
    assert wait_screen(host, terminal.id, r"(?i)hello (\w+)").match == "Hello World"
    assert wait_screen(host, terminal.id, "^Hello").match == "Hello"
    close(host, terminal.id)
