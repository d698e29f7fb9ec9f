"""Agents and their terminals run in a sandbox (bubblewrap; containment.py, sandbox.py).

A prober agent -- in Python, Go and TypeScript, with the same actions and answers -- tries,
from inside, what its sandbox must refuse -- a TCP connection to a
listener this test opened on 127.0.0.1, the host's token file and state directory, another
agent's folder, writing outside its scratch, seeing other processes -- and does what it must
still do: fetch through the host's ``net.fetch`` (audited), write its scratch and a private
/tmp, run a terminal that sees only its own processes. Go and TypeScript agents get the same
namespaces (read from /proc by the test). Without bubblewrap, ``mode = "required"`` refuses to
start agents naming what is missing, and ``mode = "off"`` warns at every start.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import agent_io_pb2, gateway_pb2, supervisor_pb2
from tests.gateway._support import Recorder
from tests.support.agents import AGENTS, deploy, state_name, watch_until
from tests.support.calls import agent_input, data, struct
from tests.support.host import ETHER, HostProcess
from tests.support.procs import path_without

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (make terminal-tools)"
)

TOKEN = "sandbox-test-token-0123456789"
AUTH = (("authorization", f"Bearer {TOKEN}"),)
PROBER = AGENTS / "prober"


@dataclass(frozen=True)
class Prober:
    """One language's prober: its deployed name and its folder."""

    name: str
    folder: Path


PROBERS = {
    "python": Prober("prober", PROBER),
    "go": Prober("goprober", AGENTS / "go_prober"),
    "typescript": Prober("tsprober", AGENTS / "ts_prober"),
}
LOOPBACK_ONLY = {"allow_hosts": ["127.0.0.1"], "allow_addresses": ["127.0.0.1/32"], "burst": 100}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sandbox")


@pytest.fixture(scope="module")
def web() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sandboxed(folder: Path) -> Iterator[HostProcess]:
    """A host with a token file, the probers of the three languages (allowed to fetch from
    loopback) and another Python agent (detacher) whose processes and folder they must not see."""
    tokens = folder / "tokens"
    tokens.write_text(f"tester {TOKEN}\n")
    tokens.chmod(0o600)
    host = HostProcess(folder / "state", "--auth-tokens-file", str(tokens))
    try:
        host.wait_serving()
        for each in PROBERS.values():
            deploy(host, each.folder, metadata=AUTH, config=struct({"egress": LOOPBACK_ONLY}))
        deploy(host, AGENTS / "detacher", metadata=AUTH)
        yield host
    finally:
        host.stop()


@pytest.fixture(params=list(PROBERS))
def prober(request: pytest.FixtureRequest) -> Prober:
    return PROBERS[request.param]


def probe(
    ether: HostProcess, action: str, prober: Prober = PROBERS["python"], **params: Any
) -> Any:
    request = agent_io_pb2.ExecuteRequest(input=agent_input(prober.name, action, params))
    output = ether.agents.Execute(request, timeout=90, metadata=AUTH).output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    return data(output)


def pid_of(host: HostProcess, agent: str, metadata: Any = AUTH) -> int:
    request = supervisor_pb2.ListProcessesRequest(agent=agent)
    return int(
        host.supervisor.ListProcesses(request, timeout=10, metadata=metadata).processes[0].pid
    )


def test_an_agent_reaches_no_network_but_net_fetch(
    sandboxed: HostProcess, web: Recorder, prober: Prober
) -> None:
    """A TCP listener on the host's 127.0.0.1 is not reachable (the sandbox's loopback is its
    own); a net.fetch of the same kind of address through the host (the SDK's host call)
    works and is audited."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # the host side reaches it
        outcome = probe(sandboxed, "connect", prober, host="127.0.0.1", port=port)
    assert outcome == {"ok": False, "error": "ConnectionRefusedError"}
    fetched = probe(sandboxed, "get", prober, url=web.url(f"/through-{prober.name}"))
    assert fetched == {"status": 200, "text": f"hello from /through-{prober.name}"}
    records = sandboxed.gateway.ListAudit(
        gateway_pb2.ListAuditRequest(agent=prober.name), timeout=10, metadata=AUTH
    ).records
    assert [r.decision for r in records] == [gateway_pb2.AUDIT_DECISION_ALLOWED]


def test_an_agent_sees_only_its_own_files(
    sandboxed: HostProcess, folder: Path, prober: Prober
) -> None:
    """The token file, the state directory, another agent's folder and the host's home are
    not there; the agent's own folder is read-only; its scratch and /tmp are its own."""
    state = (folder / "state").absolute()
    hidden = (folder / "tokens", state / "agents.sqlite3", state / "gateway", AGENTS / "detacher")
    for path in (*hidden, Path("/home"), Path("/var/log")):
        assert probe(sandboxed, "read", prober, path=str(path)) == {
            "ok": False,
            "error": "FileNotFoundError",
        }, path
    # Of the state directory and the host's home only the mount points of what the agent runs
    # from are there (its scratch, its dependencies, a Go agent's binary; here a Python
    # installed under ~/.pyenv).
    entries = set(probe(sandboxed, "read", prober, path=str(state))["entries"])
    assert entries <= {"scratch", "deps", "builds"}, entries
    runtime = {
        Path(p).relative_to(Path.home()).parts[0]
        for p in (sys.base_prefix, sys.prefix)
        if Path(p).is_relative_to(Path.home())
    }
    home = probe(sandboxed, "read", prober, path=str(Path.home()))
    assert not home["ok"] or set(home["entries"]) <= runtime, home
    assert probe(sandboxed, "read", prober, path=str(prober.folder / "agent.toml"))["ok"]
    looked = probe(sandboxed, "look", prober)
    scratch = str(state / "scratch" / prober.name / "0")
    assert looked["env"] == {
        "HOME": scratch,
        "TMPDIR": "/tmp",
        "ETHER_SCRATCH": scratch,
        "HOSTNAME": "ether-sandbox",  # a uts namespace of its own
    }
    assert looked["cwd"] == str(prober.folder)
    planted = (prober.folder / "planted.txt", Path("/usr/planted.txt"), Path("/etc/planted.txt"))
    for refused in planted:
        assert not probe(sandboxed, "write", prober, path=str(refused))["ok"], refused
        assert not refused.exists()
    assert probe(sandboxed, "write", prober, path=f"{scratch}/note.txt")["ok"]
    assert (state / "scratch" / prober.name / "0" / "note.txt").exists()  # the host sees it
    private = f"/tmp/{prober.name}-{os.getpid()}.txt"
    assert probe(sandboxed, "write", prober, path=private)["ok"]
    assert not Path(private).exists()  # the sandbox's /tmp, not the host's


def test_an_agent_sees_only_its_own_processes(sandboxed: HostProcess, prober: Prober) -> None:
    """Neither the host nor another agent is among the processes an agent can see."""
    commands = probe(sandboxed, "look", prober)["processes"]
    others = ("ether serve", "detacher", *(str(p.folder) for p in PROBERS.values() if p != prober))
    assert not any(other in c for c in commands.values() for other in others), commands
    assert any(prober.folder.name in c or "ether_agent" in c for c in commands.values()), commands
    assert len(commands) <= 4, commands  # bwrap's init, the agent, maybe a helper


def test_a_sandboxed_terminal_sees_only_its_own_processes(
    sandboxed: HostProcess, folder: Path
) -> None:
    """A terminal an agent runs (term.run) is sandboxed like the agent: `ps ax` there lists
    bwrap's init, the shell and ps itself -- not the agent, not the host; it starts in a
    scratch directory of its own, wiped when it closes, with no network but its own loopback."""
    ran = probe(sandboxed, "shell", command="ps ax -o pid=,args=; pwd; grep -c : /proc/net/dev")
    assert ran["reason"] == "exit" and ran["exit_code"] == 0, ran
    lines = [line.strip() for line in ran["output"].splitlines() if line.strip()]
    *processes, cwd, interfaces = lines
    assert any(line.split(None, 1)[1].startswith("ps ax") for line in processes), lines
    assert not any("ether" in line or "prober" in line for line in processes), lines
    assert len(processes) <= 4, lines
    scratch = (folder / "state").absolute() / "scratch" / "terminals"
    assert Path(cwd).parent == scratch, lines
    assert not Path(cwd).exists(), "term.run closed the terminal: its scratch is wiped"
    assert interfaces == "1", lines  # lo only


def test_go_and_typescript_agents_run_in_namespaces_of_their_own(tmp_path: Path) -> None:
    """The Go and TypeScript test agents run (hello, RUNNING) with network, mount, pid, ipc
    and uts namespaces other than the host's."""
    host = HostProcess(tmp_path / "state")
    try:
        host.wait_serving()
        for name in ("go_hostcalls", "ts_hostcalls"):
            agent = deploy(host, AGENTS / name)
            pid = pid_of(host, agent, metadata=())
            for kind in ("net", "mnt", "pid", "ipc", "uts"):
                inside = os.readlink(f"/proc/{pid}/ns/{kind}")
                assert inside != os.readlink(f"/proc/{host.process.pid}/ns/{kind}"), (name, kind)
    finally:
        host.stop()


def test_an_agent_toml_cannot_ask_for_the_hosts_network(tmp_path: Path) -> None:
    """network = "host" in an agent's own agent.toml is refused at deploy, naming the setting;
    the same from the host config's [sandbox.agents.NAME] is allowed."""
    agent = tmp_path / "wants-network"
    shutil.copytree(PROBER, agent)
    with (agent / "agent.toml").open("a") as manifest:
        manifest.write('\n[sandbox]\nnetwork = "host"\n')
    config = tmp_path / "ether.toml"
    config.write_text('[sandbox.agents.granted]\nnetwork = "host"\n')
    host = HostProcess(tmp_path / "state", "--config", str(config))
    try:
        host.wait_serving()
        with pytest.raises(grpc.RpcError) as refused:
            deploy(host, agent, name="prober")
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "sandbox.network" in (refused.value.details() or "")
        deploy(host, agent, name="granted")
        pid = pid_of(host, "granted", metadata=())
        assert os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")
    finally:
        host.stop()


def test_a_sandbox_path_that_does_not_exist_stops_the_host_at_start(tmp_path: Path) -> None:
    config = tmp_path / "ether.toml"
    config.write_text(f'[sandbox]\nread_only = ["{tmp_path / "missing"}"]\n')
    run = subprocess.run(
        [str(ETHER), "serve", "--config", str(config), "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr.strip() == f"ether: sandbox.read_only: {tmp_path / 'missing'} does not exist"


def test_without_bubblewrap_a_required_sandbox_refuses_to_start_agents(tmp_path: Path) -> None:
    config = tmp_path / "ether.toml"
    config.write_text('[sandbox]\nmode = "required"\n')
    path = path_without(tmp_path / "bin", "bwrap")
    host = HostProcess(tmp_path / "state", "--config", str(config), env={"PATH": path})
    try:
        host.wait_serving()
        host.supervisor.DeployAgent(
            supervisor_pb2.DeployAgentRequest(spec=supervisor_pb2.AgentSpec(path=str(PROBER))),
            timeout=30,
        )
        event = watch_until(host, "prober", {"RUNNING", "FATAL"}, after=0)
        assert state_name(event.state) == "FATAL"
        assert "sandbox required" in event.reason and "bubblewrap (bwrap) is not installed" in (
            event.reason
        ), event.reason
    finally:
        host.stop()


def test_a_sandbox_turned_off_is_a_warning_at_every_start(tmp_path: Path) -> None:
    config = tmp_path / "ether.toml"
    config.write_text('[sandbox]\nmode = "off"\n')
    for start in range(2):
        host = HostProcess(tmp_path / f"state{start}", "--config", str(config))
        try:
            host.wait_serving()
            warnings = [r for r in host.records if r.get("event") == "agents run without a sandbox"]
            assert len(warnings) == 1 and warnings[0]["level"] == "warning", host.records
            assert "sandbox.mode" in warnings[0]["reason"]
            agent = deploy(host, PROBER)
            assert os.readlink(f"/proc/{pid_of(host, agent, ())}/ns/net") == os.readlink(
                "/proc/self/ns/net"
            )
        finally:
            host.stop()
