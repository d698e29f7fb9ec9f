"""Under a real host, what an agent's child processes write to the stdout they inherit lands in
the agent's log, never in the frame stream (docs/protocol.md, rule 11)."""

from __future__ import annotations

import uuid

import grpc

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, execute
from tests.support.host import HostProcess


def test_a_typescript_agents_child_writes_to_the_log_not_the_link(host: HostProcess) -> None:
    """The TypeScript adapter can move frames off fd 1 only when its stdout is a pipe it can
    reopen: the host gives agents pipes (a socket cannot be reopened)."""
    agent = deploy(host, AGENTS / "ts_hostcalls")
    marker = f"child-noise-{uuid.uuid4().hex[:8]}"
    seen = len(host.records)
    output = execute(host, agent, "noisy_child", {"text": marker}, timeout=30)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    assert data(output) == {"done": True}
    stream = host.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent=agent, tail_lines=1000, follow=True), timeout=30
    )
    try:
        assert any(marker in line.message for line in stream), f"{marker} never logged"
    except grpc.RpcError as error:
        raise AssertionError(f"{agent}'s log ended before {marker} came") from error
    finally:
        stream.cancel()
    # The call's rpc line is logged after anything the host read on the link during the call.
    host.wait_for_log(
        lambda r: r.get("event") == "rpc" and r.get("method", "").endswith("/Execute")
    )
    noise = [r for r in host.records[seen:] if r.get("event") == "stdout noise"]
    assert noise == [], noise
