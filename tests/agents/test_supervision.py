"""Supervision that keeps its word: an idempotent task outlives the replica it ran on, an exit
the host did not ask for is restarted, and scaling converges to the replicas asked for."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import (
    AGENTS,
    EXAMPLES,
    agent_pids,
    deploy,
    remove_agent,
    state_name,
    watch_until,
)
from tests.support.calls import agent_input, data, details, execute
from tests.support.host import HostProcess
from tests.support.procs import wait_gone

WORKER = AGENTS / "worker"


def test_an_idempotent_task_whose_replica_is_killed_finishes_on_the_other(
    host: HostProcess,
) -> None:
    """Two replicas; SIGKILL of the one running an idempotent task: the call still succeeds,
    answered by the other replica on attempt 2 (not UNAVAILABLE naming the dead pid)."""
    name = deploy(host, WORKER, name="retrying", replicas=2)
    try:
        request = agent_io_pb2.ExecuteStreamRequest(
            input=agent_input(name, "nap", {"ms": 1500}, idempotent=True)
        )
        stream = host.agents.ExecuteStream(request, timeout=60)
        first = next(stream)
        assert first.WhichOneof("event") == "started"
        killed = first.started.pid
        assert killed in agent_pids(host, name)
        os.kill(killed, signal.SIGKILL)
        events = list(stream)
        output = events[-1].output
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
        assert data(output) == {"slept": 1500}
        assert output.metadata.attempt == 2
        assert output.metadata.pid not in (0, killed)
    finally:
        remove_agent(host, name)


def test_an_idempotent_task_waits_for_the_restart_of_its_only_replica(
    host: HostProcess,
) -> None:
    """One replica; SIGKILL of it while it runs an idempotent task: the retry waits for the
    restarted process (within the call's deadline) instead of failing on the dead one."""
    name = deploy(
        host, WORKER, name="lonely", backoff_base=duration_pb2.Duration(nanos=200_000_000)
    )
    try:
        request = agent_io_pb2.ExecuteStreamRequest(
            input=agent_input(name, "nap", {"ms": 500}, idempotent=True)
        )
        stream = host.agents.ExecuteStream(request, timeout=60)
        first = next(stream)
        killed = first.started.pid
        os.kill(killed, signal.SIGKILL)
        output = list(stream)[-1].output
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
        assert output.metadata.attempt == 2
        assert output.metadata.pid not in (0, killed)
        assert agent_pids(host, name) == [output.metadata.pid]
    finally:
        remove_agent(host, name)


def test_idempotent_calls_all_succeed_while_replicas_are_killed(host: HostProcess) -> None:
    """Many concurrent Execute calls and Pipe inputs of an idempotent action while the agent's
    replicas are SIGKILLed one after the other: every call and every input succeeds."""
    name = deploy(
        host,
        WORKER,
        name="chaos",
        replicas=2,
        # Kills come faster than a start is judged stable: none of them may end in FATAL.
        start_retries=100,
        max_restarts=100,
        backoff_base=duration_pb2.Duration(nanos=200_000_000),
    )
    done = threading.Event()
    failures: list[str] = []

    def execute_loop(worker: int) -> int:
        calls = 0
        while not done.is_set():
            params = {"worker": worker, "call": calls}
            try:
                output = host.agents.Execute(
                    agent_io_pb2.ExecuteRequest(input=agent_input(name, "echo", params)),
                    timeout=60,
                ).output
            except grpc.RpcError as error:
                failures.append(f"Execute: {error.code().name}: {error.details()}")
                continue
            if data(output) != params:
                failures.append(f"Execute answered {data(output)} for {params}")
            calls += 1
        return calls

    def pipe_loop(worker: int) -> int:
        def inputs() -> Iterator[agent_io_pb2.PipeRequest]:
            sent = 0
            while not done.is_set():
                yield agent_io_pb2.PipeRequest(
                    input=agent_input(name, "echo", {"pipe": worker, "n": sent}),
                    max_in_flight=8,
                )
                sent += 1

        answered = 0
        try:
            for response in host.agents.Pipe(inputs(), timeout=120):
                output = response.output
                if output.status != agent_io_pb2.TASK_STATUS_SUCCESS:
                    failures.append(
                        f"Pipe input failed: {output.error.code}: {output.error.message}"
                    )
                answered += 1
        except grpc.RpcError as error:
            failures.append(f"Pipe: {error.code().name}: {error.details()}")
        return answered

    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            calls = [pool.submit(execute_loop, i) for i in range(4)]
            calls += [pool.submit(pipe_loop, i) for i in range(2)]
            try:
                sequence = 0
                for round_ in range(4):
                    replica = round_ % 2
                    pid = agent_pids(host, name)[replica]
                    assert pid > 0  # never os.kill(0, ...): that is our own process group
                    os.kill(pid, signal.SIGKILL)
                    back = watch_until(host, name, {"RUNNING"}, after=sequence, replica=replica)
                    while back.pid == pid:
                        back = watch_until(
                            host, name, {"RUNNING"}, after=back.sequence, replica=replica
                        )
                    sequence = back.sequence
            finally:
                done.set()
            answered = [future.result() for future in calls]
        assert failures == []
        assert all(answered), answered
        agent = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=name), timeout=10).agent
        assert state_name(agent.state) == "RUNNING"
    finally:
        remove_agent(host, name)


def test_an_idempotent_task_outlives_both_replicas_dying_in_turn(host: HostProcess) -> None:
    """Two replicas; the process running an idempotent task is SIGKILLed on each of its first
    three attempts (both replicas in turn, then a restarted one): the call still succeeds, on
    attempt 4, well within its deadline, instead of failing UNAVAILABLE after one retry."""
    name = deploy(
        host,
        WORKER,
        name="twice-dead",
        replicas=2,
        start_retries=100,
        max_restarts=100,
        backoff_base=duration_pb2.Duration(nanos=100_000_000),
    )
    try:
        request = agent_io_pb2.ExecuteStreamRequest(
            input=agent_input(name, "nap", {"ms": 3000}, idempotent=True)
        )
        stream = host.agents.ExecuteStream(request, timeout=120)
        killed: list[int] = []
        output = None
        for event in stream:
            kind = event.WhichOneof("event")
            if kind == "started":
                assert event.started.attempt == len(killed) + 1
                assert event.started.pid not in killed
                if len(killed) < 3:
                    assert event.started.pid > 0  # never os.kill(0, ...)
                    os.kill(event.started.pid, signal.SIGKILL)
                    killed.append(event.started.pid)
            elif kind == "output":
                output = event.output
        assert output is not None
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
        assert data(output) == {"slept": 3000}
        assert output.metadata.attempt == 4
        assert output.metadata.pid not in (0, *killed)
        # Both replicas were among the dead: the task went from one to the other.
        assert len(set(killed)) == 3
    finally:
        remove_agent(host, name)


def test_a_non_idempotent_task_whose_process_died_is_not_retried(host: HostProcess) -> None:
    """Two replicas; SIGKILL of the one running a task that is not idempotent (it may have
    run): the call fails UNAVAILABLE naming the dead process, with no second attempt."""
    name = deploy(host, WORKER, name="once-only", replicas=2)
    try:
        request = agent_io_pb2.ExecuteStreamRequest(input=agent_input(name, "nap", {"ms": 3000}))
        stream = host.agents.ExecuteStream(request, timeout=60)
        first = next(stream)
        assert first.WhichOneof("event") == "started"
        assert first.started.attempt == 1
        killed = first.started.pid
        assert killed > 0
        # The frame is out once the agent says it is napping; before that the task would be
        # "never sent", which is retried whatever its action.
        for event in stream:
            if event.WhichOneof("event") == "log":
                break
        os.kill(killed, signal.SIGKILL)
        with pytest.raises(grpc.RpcError) as failed:
            for event in stream:
                assert event.WhichOneof("event") != "started", "the task was sent again"
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE, failed.value.details()
        assert details(failed.value)["ErrorInfo"].reason == "AGENT_DIED"
    finally:
        remove_agent(host, name)


def test_a_task_refused_as_shutting_down_runs_on_the_other_replica(host: HostProcess) -> None:
    """Two replicas; the one that gets a task (not idempotent) answers it `shutting_down`, as a
    draining agent does: the task did not run there, so the caller gets the other replica's
    success (attempt 2). The refusing process gets no more tasks, shows STOPPING, and since it
    does not exit by itself it is restarted."""
    name = deploy(host, WORKER, name="refusing", replicas=2)
    try:
        # Both replicas idle: a call goes to the first of them, this one and the next alike --
        # unless the first still held whoami's slot for a moment (it is released just after the
        # answer), when refuse_in runs on the other, which serves it at once. Then try again:
        # nothing refused, nothing changed.
        for _ in range(5):
            spawn = data(execute(host, name, "whoami"))["spawn"]
            assert spawn
            events = list(
                host.agents.ExecuteStream(
                    agent_io_pb2.ExecuteStreamRequest(
                        input=agent_input(name, "refuse_in", {"spawn": spawn})
                    ),
                    timeout=60,
                )
            )
            started = [e.started for e in events if e.WhichOneof("event") == "started"]
            if len(started) > 1:
                break
        output = events[-1].output
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
        assert data(output) == {"served": True}
        assert [s.attempt for s in started] == [1, 2]
        refused = started[0].pid
        assert output.metadata.attempt == 2
        assert output.metadata.pid not in (0, refused)
        # Out of the rotation: as the first replica it would otherwise get every next call.
        for _ in range(6):
            answer = execute(host, name, "refuse_in", {"spawn": spawn})
            assert answer.status == agent_io_pb2.TASK_STATUS_SUCCESS, answer.error.message
            assert answer.metadata.pid != refused
            assert answer.metadata.attempt == 1
        # Shown STOPPING while it drains; it never exits on its own, so it is replaced once a
        # stop would have ended it.
        stopping = watch_until(host, name, {"STOPPING"})
        assert stopping.pid == refused
        back = watch_until(
            host, name, {"RUNNING"}, after=stopping.sequence, replica=stopping.replica
        )
        assert back.pid not in (0, refused)
        assert refused not in agent_pids(host, name)
    finally:
        remove_agent(host, name)


def test_calls_succeed_while_a_replica_drains_after_an_outside_sigterm(host: HostProcess) -> None:
    """Two replicas; calls of an action that is not idempotent flow while one replica, with a
    task in flight, gets SIGTERM from outside: it drains (answering new tasks `shutting_down`)
    and exits, and every call still succeeds on the other replica or the restarted one."""
    name = deploy(host, WORKER, name="draining", replicas=2, start_retries=100)
    done = threading.Event()
    failures: list[str] = []

    def call_loop(worker: int) -> int:
        calls = 0
        while not done.is_set():
            try:
                output = execute(host, name, "add", {"a": worker, "b": calls}, timeout=60)
            except grpc.RpcError as error:
                failures.append(f"{error.code().name}: {error.details()}")
                continue
            if output.status != agent_io_pb2.TASK_STATUS_SUCCESS:
                failures.append(f"{output.error.code}: {output.error.message}")
            elif data(output) != {"sum": worker + calls}:
                failures.append(f"add answered {data(output)}")
            calls += 1
        return calls

    try:
        # A task in flight keeps the terminated replica draining (the adapter's grace) rather
        # than gone at once, so tasks keep reaching it meanwhile.
        nap = host.agents.ExecuteStream(
            agent_io_pb2.ExecuteStreamRequest(input=agent_input(name, "nap", {"ms": 20000})),
            timeout=60,
        )
        draining = next(nap).started.pid
        assert draining > 0
        replica = next(
            p.replica
            for p in host.supervisor.ListProcesses(
                supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
            ).processes
            if p.pid == draining
        )
        with ThreadPoolExecutor(max_workers=4) as pool:
            loops = [pool.submit(call_loop, i) for i in range(4)]
            try:
                os.kill(draining, signal.SIGTERM)
                back = watch_until(host, name, {"RUNNING"}, replica=replica)
                while back.pid in (0, draining):
                    back = watch_until(
                        host, name, {"RUNNING"}, after=back.sequence, replica=replica
                    )
            finally:
                done.set()
            answered = [loop.result() for loop in loops]
        nap.cancel()
        assert failures == []
        assert all(answered), answered
    finally:
        remove_agent(host, name)


@pytest.mark.parametrize(
    ("folder", "action", "params"),
    [
        (WORKER, "echo", {"back": True}),
        (EXAMPLES / "wordcount", "count_text", {"text": "one two two"}),
        (EXAMPLES / "report", "render", {"title": "Back", "findings": []}),
    ],
    ids=["python", "go", "typescript"],
)
def test_an_outside_sigterm_is_restarted_under_on_failure(
    host: HostProcess, folder: Path, action: str, params: dict[str, Any]
) -> None:
    """SIGTERM from outside the host (the adapters then exit 0) is an exit the host did not ask
    for: the default on-failure policy restarts the replica instead of leaving it EXITED, and
    the agent answers again."""
    name = deploy(host, folder, name=f"term-{folder.name}")
    try:
        running = watch_until(host, name, {"RUNNING"})
        assert agent_pids(host, name) == [running.pid]
        os.kill(running.pid, signal.SIGTERM)
        ended = watch_until(host, name, {"BACKOFF", "EXITED", "FATAL"}, after=running.sequence)
        assert state_name(ended.state) == "BACKOFF", ended.reason
        back = watch_until(host, name, {"RUNNING", "EXITED", "FATAL"}, after=ended.sequence)
        assert state_name(back.state) == "RUNNING", back.reason
        assert back.pid not in (0, running.pid)
        output = execute(host, name, action, params)
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    finally:
        remove_agent(host, name)


def _wait_converged(host: HostProcess, name: str, replicas: int, after: int) -> None:
    """Follow WatchEvents from ``after`` until GetAgent shows ``replicas`` ready of
    ``replicas``."""

    def converged() -> bool:
        agent = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=name), timeout=10).agent
        return agent.replicas == replicas and agent.ready_replicas == replicas

    if converged():
        return
    stream = host.supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent=name, after_sequence=after), timeout=120
    )
    try:
        for _ in stream:
            if converged():
                return
    finally:
        stream.cancel()


@pytest.mark.parametrize(
    "folder", [EXAMPLES / "scout", EXAMPLES / "wordcount"], ids=["python", "go"]
)
def test_scaling_down_then_up_converges_to_the_replicas_asked_for(
    host: HostProcess, folder: Path
) -> None:
    """ScaleAgent 1->2->1->2->3->1->2: a scale down returns once the processes scaled away have
    ended; after each step GetAgent shows as many ready replicas as asked for, and
    ListProcesses lists exactly replicas 0..n-1, all RUNNING with a process of their own (no
    replica left STOPPED, none scaled away still listed)."""
    name = deploy(host, folder, name=f"scale-{folder.name}")
    try:
        for replicas in (2, 1, 2, 3, 1, 2):
            scaled_away = agent_pids(host, name)[replicas:]
            status = host.supervisor.ScaleAgent(
                supervisor_pb2.ScaleAgentRequest(name=name, replicas=replicas), timeout=60
            ).agent
            # Scaling down returns once the replicas scaled away are down.
            assert wait_gone(scaled_away, within=0) == []
            _wait_converged(host, name, replicas, status.event_sequence)
            listed = host.supervisor.ListProcesses(
                supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
            ).processes
            assert [p.replica for p in listed] == list(range(replicas)), replicas
            assert {state_name(p.state) for p in listed} == {"RUNNING"}
            assert len({p.pid for p in listed} - {0}) == replicas
    finally:
        remove_agent(host, name)
