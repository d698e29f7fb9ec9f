"""docs/limits.md, "Resources of agent replicas and terminals", the `file_size` row: under
RLIMIT_FSIZE "a write past it fails with EFBIG (SIGXFSZ ends programs that do not ignore it:
the exit reason says `file size limit ... exceeded`)". No other test writes past the limit.

The agent is tests/agents/scribe: it writes into its scratch folder, once as Python runs it
(SIGXFSZ ignored: the write fails) and once with SIGXFSZ at its default action (the kernel ends
the process, and the host's WatchEvents reason must name the limit).
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from ether.v1 import supervisor_pb2
from tests.support.agents import AGENTS, deploy, reasons_until_restarted
from tests.support.calls import data, execute
from tests.support.host import HostProcess, sandbox_grants
from tests.support.resources import mechanisms

LIMIT = 1 << 20  # file_size = "1MiB" below; the host says it as "1 MiB"
BUDGET = 60.0  # seconds for the kernel and the host to act, on a loaded 2-core machine


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A host whose agents may write files of at most 1 MiB ([limits.agents] file_size)."""
    folder = tmp_path_factory.mktemp("file-size")
    config = folder / "host.toml"
    config.write_text(sandbox_grants() + '[limits.agents]\nfile_size = "1MiB"\n')
    process = HostProcess(folder / "state", env={"ETHER_CONFIG": str(config)})
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


def test_the_host_enforces_file_size_with_rlimit_fsize(host: HostProcess) -> None:
    """What the doc's "enforced by" column says for file_size, as the host logs it at start."""
    assert mechanisms(host)["file_size"] == "rlimit RLIMIT_FSIZE"


def test_a_write_past_file_size_fails_with_efbig_and_the_agent_answers_on(
    host: HostProcess,
) -> None:
    """Python ignores SIGXFSZ, so the write that would pass 1 MiB fails with EFBIG inside the
    agent: the file stops at the limit, and the same process answers the next call."""
    agent = deploy(host, AGENTS / "scribe", name="scribe-efbig")
    pid = (
        host.supervisor.ListProcesses(supervisor_pb2.ListProcessesRequest(agent=agent), timeout=10)
        .processes[0]
        .pid
    )
    result = data(execute(host, agent, "fill", {"name": "big", "size": 4 * LIMIT}))
    assert result == {"written": LIMIT, "error": "EFBIG", "on_disk": LIMIT}, result
    # Under the limit nothing fails, in the same process (the agent decided what to do).
    small = data(execute(host, agent, "fill", {"name": "small", "size": LIMIT // 2}))
    assert small == {"written": LIMIT // 2, "error": "", "on_disk": LIMIT // 2}, small
    after = (
        host.supervisor.ListProcesses(supervisor_pb2.ListProcessesRequest(agent=agent), timeout=10)
        .processes[0]
        .pid
    )
    assert after == pid
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=agent), timeout=30)


def test_sigxfsz_ends_an_agent_that_does_not_ignore_it_and_the_reason_names_the_limit(
    host: HostProcess,
) -> None:
    """With SIGXFSZ at its default action the write past 1 MiB ends the process; the task
    running on it fails, and the replica's exit reason (WatchEvents) says
    `file size limit 1 MiB exceeded`. The replica restarts per its policy and serves again."""
    agent = deploy(host, AGENTS / "scribe", name="scribe-sigxfsz")
    with pytest.raises(grpc.RpcError) as died:
        execute(host, agent, "fill_unguarded", {"name": "big", "size": 4 * LIMIT}, timeout=BUDGET)
    assert died.value.code() == grpc.StatusCode.UNAVAILABLE, died.value
    seen = reasons_until_restarted(host, agent)
    assert any(
        reason.startswith("BACKOFF") and "file size limit 1 MiB exceeded" in reason
        for reason in seen
    ), seen
    again = data(execute(host, agent, "fill", {"name": "after", "size": 1024}))
    assert again["error"] == "", again
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=agent), timeout=30)
