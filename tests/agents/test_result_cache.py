"""The result cache on one host: an action declared with a cache_ttl is answered from the cache
for the same params (metadata.cached), through every way a task runs; force_refresh runs it
again; entries expire; other params, other actions and failures are not cached; the memory the
cache holds is bounded by ``[cache] max_bytes`` (least recently used out first)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, data, execute
from tests.support.host import HostProcess

# Room for two bulk results of BULK bytes and not three.
MAX_BYTES = 20_000
BULK = 8_000


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    state = tmp_path_factory.mktemp("cache-host") / "state"
    process = HostProcess(state, env={"ETHER_CACHE_MAX_BYTES": str(MAX_BYTES)})
    try:
        process.wait_serving()
        deploy(process, AGENTS / "cached")
        yield process
    finally:
        process.stop()


def _run(host: HostProcess, action: str, **params: Any) -> agent_io_pb2.AgentOutput:
    force = bool(params.pop("force_refresh", False))
    output = execute(host, "cached", action, params, force_refresh=force)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS or params.get("fail"), output
    return output


def test_the_same_params_are_answered_from_the_cache(host: HostProcess) -> None:
    """The second call with the same params (in another key order) is the first one's result,
    marked cached, under its own task id; the agent did not run again."""
    first = execute(host, "cached", "draw", {"topic": "same", "fail": False})
    second = execute(host, "cached", "draw", {"fail": False, "topic": "same"})
    assert not first.metadata.cached
    assert second.metadata.cached
    assert data(second) == data(first)
    assert second.task_id != first.task_id
    assert second.metadata.pid == first.metadata.pid  # where the result was made
    assert second.metadata.cost == 0


def test_force_refresh_runs_again_and_replaces_the_entry(host: HostProcess) -> None:
    first = _run(host, "draw", topic="refresh")
    refreshed = _run(host, "draw", topic="refresh", force_refresh=True)
    after = _run(host, "draw", topic="refresh")
    assert not refreshed.metadata.cached
    assert data(refreshed)["nonce"] != data(first)["nonce"]
    assert after.metadata.cached
    assert data(after) == data(refreshed)


def test_other_params_and_uncached_actions_run(host: HostProcess) -> None:
    one = _run(host, "draw", topic="one")
    two = _run(host, "draw", topic="two")
    assert not two.metadata.cached
    assert data(two)["nonce"] != data(one)["nonce"]
    plain = [_run(host, "plain", topic="p") for _ in range(2)]
    assert not any(output.metadata.cached for output in plain)
    assert data(plain[0])["nonce"] != data(plain[1])["nonce"]


def test_a_failed_result_is_not_cached(host: HostProcess) -> None:
    first = execute(host, "cached", "draw", {"topic": "broken", "fail": True})
    again = execute(host, "cached", "draw", {"topic": "broken", "fail": True})
    assert first.status == again.status == agent_io_pb2.TASK_STATUS_ERROR
    assert again.error.code == "asked_to_fail"
    assert not again.metadata.cached
    assert again.metadata.started_at != first.metadata.started_at  # it ran again


def test_an_entry_expires_after_its_ttl(host: HostProcess) -> None:
    """``brief`` is kept one second: asked again until the answer is fresh (budget 60 s), the
    first answer is served from the cache until then, and the fresh one is another run."""
    first = _run(host, "brief", topic="ttl")
    budget = time.monotonic() + 60
    while True:
        later = _run(host, "brief", topic="ttl")
        if not later.metadata.cached:
            break
        assert data(later) == data(first)
        assert time.monotonic() < budget, "the entry never expired"
        time.sleep(0.1)  # polling for the expiry, not waiting for it to happen
    assert data(later)["nonce"] != data(first)["nonce"]


def test_execute_stream_pipe_and_agent_call_use_the_cache(host: HostProcess) -> None:
    """Every way of running a task goes through the cache: ExecuteStream answers with the
    cached output alone, Pipe marks it cached, and agent.call from an agent gets it (and runs
    the action again with force_refresh)."""
    first = _run(host, "draw", topic="ways")
    stream = list(
        host.agents.ExecuteStream(
            agent_io_pb2.ExecuteStreamRequest(
                input=agent_input("cached", "draw", {"topic": "ways"})
            ),
            timeout=30,
        )
    )
    assert [event.WhichOneof("event") for event in stream] == ["output"]
    assert stream[0].output.metadata.cached and data(stream[0].output) == data(first)

    requests = iter(
        [agent_io_pb2.PipeRequest(input=agent_input("cached", "draw", {"topic": "ways"}))]
    )
    piped = [response.output for response in host.agents.Pipe(requests, timeout=30)]
    assert piped[0].metadata.cached and data(piped[0]) == data(first)

    called = data(_run(host, "relay", topic="ways", refresh=False))
    assert called["metadata"]["cached"] is True
    assert called["data"] == data(first)
    refreshed = data(_run(host, "relay", topic="ways", refresh=True))
    assert refreshed["metadata"]["cached"] is False
    assert refreshed["data"]["nonce"] != data(first)["nonce"]


def test_the_cache_is_bounded_by_bytes_least_recently_used_out_first(host: HostProcess) -> None:
    """With max_bytes for two bulk results: a third pushes out the one used least recently, and
    a result larger than the whole cache is not kept."""
    _run(host, "bulk", topic="a", size=BULK)
    b = _run(host, "bulk", topic="b", size=BULK)
    assert _run(host, "bulk", topic="a", size=BULK).metadata.cached  # a is now the newer
    _run(host, "bulk", topic="c", size=BULK)
    assert _run(host, "bulk", topic="a", size=BULK).metadata.cached
    b_again = _run(host, "bulk", topic="b", size=BULK)
    assert not b_again.metadata.cached
    assert data(b_again)["nonce"] != data(b)["nonce"]
    huge = [_run(host, "bulk", topic="huge", size=MAX_BYTES * 2) for _ in range(2)]
    assert not huge[1].metadata.cached
