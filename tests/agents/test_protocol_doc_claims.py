"""Claims of docs/protocol.md that an adapter author relies on and no other test held: noise
before hello is logged, an unknown id is logged and dropped, a late result after a timeout is
dropped, ETHER_MAX_FRAME is the deployed max_frame, the link's max frame is the smaller of the
host's and the agent's, and the child's environment is an allowlist. Each runs a real host,
real agent processes (the rogue, or a probe written here that speaks the frames by hand) and
real gRPC clients."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import budget, data, details, execute
from tests.support.host import HostProcess

# A hand-written agent: reports its environment, the welcome it got and every task frame it
# saw ("report"); holds a "hold" task until its cancel comes or `ms` pass, then answers it "ok"
# anyway (a result after the host's deadline); "echo" answers its params; "fill" answers a string of
# `bytes` x's.
PROBE = r"""
import json, os, sys, threading

lock = threading.Lock()
held = set()

def send(frame):
    with lock:
        sys.stdout.write(json.dumps(frame, separators=(",", ":")) + "\n")
        sys.stdout.flush()

def answer_late(frame_id):
    with lock:
        if frame_id not in held:
            return
        held.discard(frame_id)
    send({"type": "result", "id": frame_id, "status": "ok", "result": {"late": True}})

capabilities = {"max_concurrency": 4, "cancel": True}
if os.environ.get("PROBE_MAX_FRAME"):
    capabilities["max_frame"] = int(os.environ["PROBE_MAX_FRAME"])
send({"type": "hello", "protocol": 1, "agent": {"name": "probe", "version": "0"},
      "actions": [{"name": a} for a in ("report", "hold", "echo", "fill")],
      "capabilities": capabilities, "pid": os.getpid()})
welcome = json.loads(sys.stdin.readline())
tasks = []
for line in sys.stdin:
    frame = json.loads(line)
    if frame.get("type") == "task":
        tasks.append(frame)
        if frame["action"] == "report":
            report = {"env": dict(os.environ), "welcome": welcome, "tasks": tasks}
            send({"type": "result", "id": frame["id"], "status": "ok", "result": report})
        elif frame["action"] == "fill":
            result = {"data": "x" * frame["params"]["bytes"]}
            send({"type": "result", "id": frame["id"], "status": "ok", "result": result})
        elif frame["action"] == "hold":
            held.add(frame["id"])
            timer = threading.Timer(frame["params"]["ms"] / 1000, answer_late, [frame["id"]])
            timer.daemon = True
            timer.start()
        else:
            send({"type": "result", "id": frame["id"], "status": "ok", "result": frame["params"]})
    elif frame.get("type") == "cancel":
        answer_late(frame.get("id"))
    elif frame.get("type") == "shutdown":
        break
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("probe")
    (folder / "probe.py").write_text(PROBE)
    # A long cancel grace: the late answer to a cancel is not "wedged" (no restart).
    (folder / "agent.toml").write_text(
        'language = "python"\ncommand = ["python3", "probe.py"]\ncancel_grace = 60\n'
    )
    return folder


def report(host: HostProcess, agent: str) -> dict[str, Any]:
    return data(execute(host, agent, "report"))  # type: ignore[no-any-return]


def pid_of(host: HostProcess, agent: str) -> int:
    request = supervisor_pb2.ListProcessesRequest(agent=agent)
    return host.supervisor.ListProcesses(request, timeout=10).processes[0].pid


def test_non_json_lines_before_hello_are_counted_and_logged(host: HostProcess) -> None:
    """ "Non-JSON lines before it are noise (counted, logged)." The rogue prints a banner before
    its hello: the host log has a "stdout noise" record naming the agent and the line, and the
    process's noise counter has it."""
    seen = len(host.records)
    name = deploy(host, AGENTS / "rogue", name="bannered", env={"ROGUE_BANNER": "1"})
    noise = host.wait_for_log(
        lambda r: r.get("event") == "stdout noise" and r.get("agent") == name, after=seen
    )
    assert noise["line"] == "*** ROGUE AGENT v0 ***"  # the first line, before the hello
    host.wait_for_log(
        lambda r: r.get("event") == "stdout noise" and r.get("line") == "loading...", after=seen
    )
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
    )
    assert listed.processes[0].noise_lines >= 2


def test_a_result_for_an_unknown_id_is_logged_and_dropped(host: HostProcess) -> None:
    """ "An unknown id is logged and dropped." The rogue's "garbage" action writes a result for
    h-999999, an id the host never sent: the host logs it by id, and the link goes on."""
    name = deploy(host, AGENTS / "rogue", name="stray")
    seen = len(host.records)
    assert data(execute(host, name, "garbage")) == {"survived": True}
    dropped = host.wait_for_log(lambda r: r.get("id") == "h-999999", after=seen)
    assert dropped["agent"] == name and "dropped" in dropped["event"], dropped
    assert data(execute(host, name, "echo", {"next": 1})) == {"next": 1}


def test_a_late_result_after_the_deadline_is_dropped(host: HostProcess, probe: Path) -> None:
    """ "a late result after a timeout is dropped" and "the host enforces it anyway (cancel
    frame, then a failed task after a grace)". The probe answers "ok" when the host's cancel
    arrives or 3 s after the task, whichever is first: after the deadline (a budget's 1 s
    max_time; the client's own deadline is far off) either way. The caller still gets
    DEADLINE_EXCEEDED, not that result, and the link is intact."""
    name = deploy(host, probe, name="laggard")
    pid = pid_of(host, name)
    context = agent_io_pb2.TaskContext(budget=budget(max_time=1))
    with pytest.raises(grpc.RpcError) as late:
        execute(host, name, "hold", {"ms": 3000}, timeout=60, context=context)
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, late.value.details()
    # The hold did reach the probe (so its late "ok" went out on this link)...
    frames = report(host, name)["tasks"]
    assert [f["action"] for f in frames] == ["hold", "report"]
    # ... and answering within the cancel grace is no wedge: the same process serves on.
    assert pid_of(host, name) == pid
    assert data(execute(host, name, "echo", {"after": "late"})) == {"after": "late"}


def test_ether_max_frame_is_the_deployed_max_frame(host: HostProcess, probe: Path) -> None:
    """ "`ETHER_MAX_FRAME` | the host's max frame in bytes (default 16777216)." Deployed with
    max_frame 1 MiB, an agent that declares none is told 1 MiB in its environment and in the
    welcome; deployed with none, 16 MiB in both."""
    sized = deploy(host, probe, name="framed", max_frame=1024 * 1024)
    told = report(host, sized)
    assert told["env"]["ETHER_MAX_FRAME"] == str(1024 * 1024)
    assert told["welcome"]["max_frame"] == 1024 * 1024
    plain = report(host, deploy(host, probe, name="unframed"))
    assert plain["env"]["ETHER_MAX_FRAME"] == "16777216"
    assert plain["welcome"]["max_frame"] == 16777216


def test_the_links_max_frame_is_the_smaller_of_the_hosts_and_the_agents(
    host: HostProcess, probe: Path
) -> None:
    """ "The max frame is the smaller of the host's and the agent's (default 16 MiB), checked
    on whole lines." An agent declaring capabilities.max_frame 8192 is welcomed with 8192, and
    a task whose frame would be larger is refused before it is sent: INVALID_ARGUMENT with
    reason FRAME_TOO_LARGE, and the agent never sees it. A smaller one still goes through."""
    name = deploy(host, probe, name="narrowframe", env={"PROBE_MAX_FRAME": "8192"})
    assert report(host, name)["welcome"]["max_frame"] == 8192
    with pytest.raises(grpc.RpcError) as refused:
        execute(host, name, "echo", {"text": "x" * 10_000})
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value.details()
    assert details(refused.value)["ErrorInfo"].reason == "FRAME_TOO_LARGE"
    assert data(execute(host, name, "echo", {"text": "x" * 4_000})) == {"text": "x" * 4_000}
    actions = [f["action"] for f in report(host, name)["tasks"]]
    assert actions == ["report", "echo", "report"]  # the 10 kB echo never reached it


def test_a_result_line_over_the_links_max_frame_fails_its_task(
    host: HostProcess, probe: Path
) -> None:
    """ "The max frame is the smaller of the host's and the agent's ..., checked on whole
    lines. ... The host, on an oversized line, discards to the next newline, fails that
    request ... and goes on." The link with an agent declaring 8192 has a max frame of 8192
    (its welcome says so), so a 20 kB result line is oversized: frame_too_large."""
    name = deploy(host, probe, name="narrowresult", env={"PROBE_MAX_FRAME": "8192"})
    assert report(host, name)["welcome"]["max_frame"] == 8192
    output = execute(host, name, "fill", {"bytes": 20_000})
    assert output.error.code == "frame_too_large", f"answered {output.status}, {output.error}"
    assert data(execute(host, name, "echo", {"next": 1})) == {"next": 1}


@pytest.fixture
def leaky_host(tmp_path: Path) -> Iterator[HostProcess]:
    """A host whose own environment carries a secret and NODE_ENV, as a server's often does."""
    process = HostProcess(
        tmp_path / "state", env={"ETHER_TEST_SECRET": "hunter2", "NODE_ENV": "production"}
    )
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


def test_the_childs_environment_is_an_allowlist_plus_the_contract(
    leaky_host: HostProcess, probe: Path
) -> None:
    """ "The host builds the child's environment from an allowlist (`PATH`, `LANG`, `LC_*`,
    `TZ`, `TERM`) plus" the ETHER_* variables; "`NODE_ENV` is never inherited." A secret in
    the host's environment (and the host's own ETHER_CONFIG) never reaches the agent; the
    contract variables have their documented values."""
    name = deploy(leaky_host, probe, name="envprobe")
    got = report(leaky_host, name)
    env = got["env"]
    for leaked in ("ETHER_TEST_SECRET", "NODE_ENV", "ETHER_CONFIG"):
        assert leaked not in env, f"{leaked} reached the agent"
    assert env["ETHER_HOST_COOKIE"] == "ether-agent-v1"
    assert "1" in env["ETHER_PROTOCOL_VERSIONS"].split(",")
    assert env["ETHER_AGENT_NAME"] == name == got["welcome"]["agent_name"]
    assert env["ETHER_SPAWN_ID"] and env["PYTHONUNBUFFERED"] == "1"


def test_the_task_frame_as_the_agent_sees_it(host: HostProcess, probe: Path) -> None:
    """ "Ids are strings, `h-<n>` from the host"; a task frame carries `deadline_ms` (the time
    left when sent), `attempt`, `trace` and the client's `task_id`; the welcome comes first,
    with `protocol` 1 and `max_in_flight` from the hello's max_concurrency."""
    name = deploy(host, probe, name="framewatch")
    output = execute(host, name, "report", timeout=30)
    got = data(output)
    frame = got["tasks"][-1]
    assert re.fullmatch(r"h-\d+", frame["id"]), frame["id"]
    assert frame["task_id"] == output.task_id and frame["attempt"] == 1
    assert 0 < frame["deadline_ms"] <= 30_000
    assert frame["trace"]["depth"] == 0
    welcome = got["welcome"]
    assert welcome["type"] == "welcome" and welcome["protocol"] == 1
    assert welcome["max_in_flight"] == 4
