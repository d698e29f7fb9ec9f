"""``make chaos`` (``python -m bench.chaos``): traffic against a real host while a nemesis kills.

Clients keep Execute, ExecuteStream and Pipe calls going to the echo agents in Python, Go and
TypeScript (two replicas each; every echo action is idempotent) while a nemesis sends SIGKILL,
SIGSTOP then SIGCONT, and SIGTERM to random agent processes at random times. In the first phase
it also kills the host with ``kill -9`` and starts a new one on the same state directory, several
times; the second phase (the soak) keeps agent faults and traffic going with no host kill and
compares the host's RSS and open descriptors at its start and end.

What it checks, as a Jepsen-style history of every call (invoke, complete, status, task ids):
- every call ends with exactly one status, no later than its deadline plus a margin;
- no task id is answered twice (Execute, each ExecuteStream, each Pipe input);
- no call fails while the host is up: an agent fault must cost nothing to an idempotent action
  that has a second replica (calls cut by a host kill end UNAVAILABLE and are counted apart);
- nothing the host started outlives it: after each ``kill -9`` every process of the host's tree,
  snapshotted just before, is gone within a budget (scanned in /proc);
- the soak's RSS and descriptor growth stays within 10 %.

Bounded: the phases' lengths are set by flags (defaults fit in 10 minutes with setup); every
process is ours and stopped by its pid; everything listens on 127.0.0.1. The random seed is
printed first and ``--seed`` replays the same nemesis schedule. ``--record`` writes the figures
to the "Reliability" section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import duration_pb2

from bench.common import REPO, EtherHost
from bench.report import machine_markdown, markdown_table, write_section
from ether.v1 import (
    agent_io_pb2,
    agent_io_pb2_grpc,
    gateway_pb2,
    gateway_pb2_grpc,
    supervisor_pb2,
    supervisor_pb2_grpc,
)
from tests.support import fuzz

ECHO = Path(__file__).resolve().parent / "echo"
ECHO_AGENTS = {"echo-py": "python", "echo-go": "go", "echo-ts": "typescript"}
# The message consumer: republishes every message it gets on the topic "postbox.received".
POSTBOX = "postbox"
TOOLBOX = REPO / "tests" / "agents" / "toolbox"
AGENTS = {
    **{name: (ECHO / folder, {}) for name, folder in ECHO_AGENTS.items()},
    POSTBOX: (TOOLBOX, {"TOOLBOX_ON_MESSAGE": "1"}),
}
DEADLINE = 10.0  # each call's deadline
LATE_MARGIN = 1.0  # an answer later than deadline + margin counts as late
ORPHAN_BUDGET = 20.0  # seconds for a killed host's processes to be gone
WORKERS = 6
# The nemesis faults a replica about every second, far more often than the default restart
# policy tolerates (5 restarts in 300 s, then FATAL: the crash-loop guard, tested on its own).
# Opened up here so that what is measured is how the host carries calls across faults.
RESTART_POLICY: dict[str, Any] = {
    "backoff_base": duration_pb2.Duration(nanos=50_000_000),
    "backoff_cap": duration_pb2.Duration(nanos=500_000_000),
    "start_retries": 100,
    "max_restarts": 1000,
    "stable_after": duration_pb2.Duration(nanos=500_000_000),
}


# --- the history ---------------------------------------------------------------------------------


@dataclass
class History:
    """Every call's outcome, shared by the client threads (under one lock)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    accepted: int = 0
    by_status: collections.Counter[str] = field(default_factory=collections.Counter)
    by_kind: collections.Counter[str] = field(default_factory=collections.Counter)
    late: int = 0
    answered: collections.Counter[str] = field(default_factory=collections.Counter)
    failed_while_up: list[str] = field(default_factory=list)
    cut_by_host_kill: int = 0

    def record(
        self, kind: str, task_ids: list[str], status: str, elapsed: float, host_epoch: bool
    ) -> None:
        """One call ended. ``host_epoch`` is False when a host kill happened during it."""
        with self.lock:
            self.accepted += len(task_ids)
            self.by_kind[kind] += len(task_ids)
            self.by_status[status] += len(task_ids)
            if elapsed > DEADLINE + LATE_MARGIN:
                self.late += len(task_ids)
            if status != "OK":
                if host_epoch:
                    self.failed_while_up.append(f"{kind} {task_ids[0]}: {status}")
                else:
                    self.cut_by_host_kill += len(task_ids)

    def answer(self, task_id: str) -> None:
        with self.lock:
            self.answered[task_id] += 1

    @property
    def duplicates(self) -> int:
        with self.lock:
            return sum(1 for count in self.answered.values() if count > 1)


# --- the host, restarted by the nemesis ----------------------------------------------------------


class Cluster:
    """The current host, its address for the clients, and its epoch (bumped by each kill)."""

    def __init__(self, state_dir: Path, log_dir: Path) -> None:
        self.state_dir, self.log_dir = state_dir, log_dir
        self.epoch = 0
        self.up = threading.Event()
        self.host: EtherHost | None = None
        self.redeploys = 0
        self.start()

    def start(self) -> None:
        # Terminals may run only `cat`: the fuzzer's random argv must never run a program.
        config = self.state_dir.parent / "ether.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text('[terminals]\nallow_commands = ["cat"]\n')
        self.host = EtherHost(
            self.state_dir, self.log_dir / f"host-{self.epoch}.log", "--config", str(config)
        )
        self.ensure_agents()
        self.up.set()

    def ensure_agents(self) -> None:
        """Deploy the echo agents the host does not already run (a restarted host that keeps
        its deployed agents has them all; one that does not gets them again, counted)."""
        assert self.host is not None
        stub = agent_io_pb2_grpc.AgentIOServiceStub(self.host.channel)
        known = {
            a.name for a in stub.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=30).agents
        }
        for name, (folder, env) in AGENTS.items():
            if name in known:
                self.wait_running(name)
                continue
            if self.epoch:
                self.redeploys += 1
            self.host.deploy(folder, name=name, replicas=2, env=env, **RESTART_POLICY)
            self.wait_running(name)

    def wait_running(self, name: str, timeout: float = 120.0) -> None:
        assert self.host is not None
        stub = agent_io_pb2_grpc.AgentIOServiceStub(self.host.channel)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = stub.GetAgent(agent_io_pb2.GetAgentRequest(name=name), timeout=10).agent
            if info.ready_replicas >= 1:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{name} has no ready replica after {timeout:.0f} s")

    def channel(self) -> grpc.Channel:
        self.up.wait()
        assert self.host is not None
        return self.host.channel

    def tree(self) -> dict[int, str]:
        """Every process under the host (pid -> start time), from /proc."""
        assert self.host is not None
        children: dict[int, list[int]] = collections.defaultdict(list)
        starts: dict[int, str] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            children[int(fields[1])].append(int(entry))
            starts[int(entry)] = fields[19]
        found: dict[int, str] = {}
        todo = [self.host.pid]
        while todo:
            pid = todo.pop()
            for child in children.get(pid, []):
                found[child] = starts[child]
                todo.append(child)
        return found

    def kill_host(self) -> int:
        """kill -9 the host, count the processes of its tree still alive after the budget,
        start a new host on the same state directory. Returns the number left behind."""
        assert self.host is not None
        tree = self.tree()
        self.up.clear()
        self.epoch += 1
        self.host.process.kill()
        self.host.process.wait()
        self.host.channel.close()
        deadline = time.monotonic() + ORPHAN_BUDGET
        left = alive(tree)
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = alive(tree)
        for pid in left:  # ours: the tree of the host we started; never leave them running
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.start()
        return len(left)

    def agent_pids(self) -> list[int]:
        assert self.host is not None
        stub = supervisor_pb2_grpc.SupervisorServiceStub(self.host.channel)
        found = stub.ListProcesses(supervisor_pb2.ListProcessesRequest(), timeout=10)
        return [p.pid for p in found.processes if p.agent in AGENTS and p.pid > 0]

    def stop(self) -> None:
        if self.host is not None:
            self.host.stop()


def alive(tree: dict[int, str]) -> list[int]:
    """The pids of ``tree`` still alive (same start time: not a reused pid) and not zombies."""
    left = []
    for pid, start in tree.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[19] == start and fields[0] != "Z":
            left.append(pid)
    return left


# --- the clients ---------------------------------------------------------------------------------


def _input(agent: str, task_id: str, worker: int) -> agent_io_pb2.AgentInput:
    message = agent_io_pb2.AgentInput(task_id=task_id, agent=agent, action="echo")
    message.params.update({"worker": worker, "task": task_id})
    return message


def client(
    worker: int, cluster: Cluster, history: History, stop: threading.Event, seed: int
) -> None:
    """Calls of every kind, one at a time, until ``stop``; each recorded in ``history``."""
    rng = random.Random(seed * 1000 + worker)
    n = 0
    while not stop.is_set():
        channel = cluster.channel()
        epoch = cluster.epoch
        stub = agent_io_pb2_grpc.AgentIOServiceStub(channel)
        agent = rng.choice(list(ECHO_AGENTS))
        kind = rng.choice(["execute", "stream", "pipe"])
        n += 1
        prefix = f"w{worker}-{n}"
        began = time.monotonic()
        if kind == "execute":
            ids = [prefix]
            status = _execute(stub, agent, prefix, worker, history)
        elif kind == "stream":
            ids = [prefix]
            status = _stream(stub, agent, prefix, worker, history)
        else:
            ids = [f"{prefix}-{i}" for i in range(8)]
            status = _pipe(stub, agent, ids, worker, history)
        elapsed = time.monotonic() - began
        history.record(kind, ids, status, elapsed, host_epoch=cluster.epoch == epoch)
        if status == "UNAVAILABLE" and cluster.epoch != epoch:
            cluster.up.wait()


def _code(error: grpc.RpcError) -> str:
    return error.code().name


def _outcome(output: agent_io_pb2.AgentOutput) -> str:
    if output.status == agent_io_pb2.TASK_STATUS_SUCCESS:
        return "OK"
    return f"task {agent_io_pb2.TaskStatus.Name(output.status)}: {output.error.code}"


def _execute(stub: Any, agent: str, task_id: str, worker: int, history: History) -> str:
    try:
        response = stub.Execute(
            agent_io_pb2.ExecuteRequest(input=_input(agent, task_id, worker)), timeout=DEADLINE
        )
    except grpc.RpcError as error:
        return _code(error)
    history.answer(response.output.task_id)
    return _outcome(response.output)


def _stream(stub: Any, agent: str, task_id: str, worker: int, history: History) -> str:
    request = agent_io_pb2.ExecuteStreamRequest(input=_input(agent, task_id, worker))
    outcome = "no output event"
    try:
        for event in stub.ExecuteStream(request, timeout=DEADLINE):
            if event.HasField("output"):
                history.answer(event.output.task_id)
                outcome = _outcome(event.output)
    except grpc.RpcError as error:
        return _code(error)
    return outcome


def _pipe(stub: Any, agent: str, ids: list[str], worker: int, history: History) -> str:
    requests = [agent_io_pb2.PipeRequest(input=_input(agent, i, worker)) for i in ids]
    seen: list[str] = []
    worst = "OK"
    try:
        for response in stub.Pipe(iter(requests), timeout=DEADLINE):
            history.answer(response.output.task_id)
            seen.append(response.output.task_id)
            if _outcome(response.output) != "OK":
                worst = _outcome(response.output)
    except grpc.RpcError as error:
        return _code(error)
    if sorted(seen) != sorted(ids):
        return f"pipe answered {len(seen)} of {len(ids)} inputs"
    return worst


# --- messages -------------------------------------------------------------------------------------


@dataclass
class Mail:
    """Messages accepted by SendMessage and seen again on the consumer's topic."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    accepted: set[str] = field(default_factory=set)
    refused: collections.Counter[str] = field(default_factory=collections.Counter)
    received: collections.Counter[str] = field(default_factory=collections.Counter)
    lagged: int = 0

    @property
    def lost(self) -> set[str]:
        with self.lock:
            return self.accepted - set(self.received)

    @property
    def duplicates(self) -> int:
        with self.lock:
            return sum(1 for n in self.received.values() if n > 1)


def sender(cluster: Cluster, mail: Mail, stop: threading.Event) -> None:
    """SendMessage to the postbox, about 20 a second. A call cut by a host kill is sent again
    with the same request_id, so a message the dead host had accepted is not sent twice."""
    n = 0
    while not stop.is_set():
        n += 1
        request = gateway_pb2.SendMessageRequest(agent=POSTBOX, type="note", request_id=f"m-{n}")
        request.data.struct_value.update({"n": n})
        while not stop.is_set():
            stub = gateway_pb2_grpc.GatewayServiceStub(cluster.channel())
            try:
                answer = stub.SendMessage(request, timeout=DEADLINE)
            except grpc.RpcError as error:
                if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    time.sleep(0.2)
                    continue  # the same request_id again
                with mail.lock:
                    mail.refused[error.code().name] += 1
                break
            with mail.lock:
                mail.accepted.add(answer.message.id)
            break
        stop.wait(0.05)


def receiver(cluster: Cluster, mail: Mail, stop: threading.Event) -> None:
    """Follow the postbox's topic from the start, resuming after the last message seen when a
    host kill ends the stream."""
    after = 0
    while not stop.is_set():
        stub = gateway_pb2_grpc.GatewayServiceStub(cluster.channel())
        stream = stub.Subscribe(
            gateway_pb2.SubscribeRequest(topic=f"{POSTBOX}.received", after_sequence=after)
        )
        stopper = threading.Thread(target=lambda s=stream: (stop.wait(), s.cancel()), daemon=True)
        stopper.start()
        try:
            for event in stream:
                if event.HasField("lagged"):
                    with mail.lock:
                        mail.lagged += 1
                    continue
                after = event.message.sequence
                body = event.message.data.struct_value
                with mail.lock:
                    mail.received[str(body["id"])] += 1
        except grpc.RpcError:
            time.sleep(0.2)


# --- the nemesis ---------------------------------------------------------------------------------


@dataclass
class Faults:
    by_kind: collections.Counter[str] = field(default_factory=collections.Counter)
    host_kills: int = 0
    left_after_kill: list[int] = field(default_factory=list)


def nemesis(
    cluster: Cluster, faults: Faults, rng: random.Random, until: float, host_kills: int
) -> None:
    """Agent faults every 0.3-1.5 s; ``host_kills`` kill -9s spread over the phase."""
    kills_at = sorted(rng.uniform(time.monotonic() + 5, until - 5) for _ in range(host_kills))
    while time.monotonic() < until:
        time.sleep(rng.uniform(0.3, 1.5))
        if kills_at and time.monotonic() >= kills_at[0]:
            kills_at.pop(0)
            faults.host_kills += 1
            faults.left_after_kill.append(cluster.kill_host())
            continue
        try:
            pids = cluster.agent_pids()
        except grpc.RpcError:
            continue
        if not pids:
            continue
        pid = rng.choice(pids)
        kind = rng.choice(["SIGKILL", "SIGSTOP", "SIGTERM"])
        faults.by_kind[kind] += 1
        with contextlib.suppress(OSError):
            if kind == "SIGSTOP":
                os.kill(pid, signal.SIGSTOP)
                time.sleep(rng.uniform(0.1, 1.0))
                os.kill(pid, signal.SIGCONT)
            else:
                os.kill(pid, signal.SIGKILL if kind == "SIGKILL" else signal.SIGTERM)


# --- the run -------------------------------------------------------------------------------------


WARM_UP = 60.0  # seconds of soak before its RSS baseline


def sample_usage(pid: int, samples: list[tuple[float, float, int]], stop: threading.Event) -> None:
    """The host's RSS and descriptors every 5 s until ``stop`` (and once more then)."""
    began = time.monotonic()
    while True:
        samples.append((time.monotonic() - began, *host_usage(pid)))
        if stop.wait(5.0):
            samples.append((time.monotonic() - began, *host_usage(pid)))
            return


def host_usage(pid: int) -> tuple[float, int]:
    """(RSS in MiB, open descriptors) of the host."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def rss_slopes(samples: list[tuple[float, float, int]]) -> str:
    """How fast RSS rose in each half of the soak after its warm-up: a bounded buffer still
    filling slows down in the second half, a leak does not."""
    warmed = [x for x in samples if x[0] >= WARM_UP]
    if len(warmed) < 3:
        return "-"
    middle = warmed[len(warmed) // 2]
    halves = ((warmed[0], middle), (middle, warmed[-1]))
    return " / ".join(f"{(b[1] - a[1]) * 60 / max(b[0] - a[0], 1):+.2f}" for a, b in halves)


def phase(
    cluster: Cluster, seed: int, seconds: float, host_kills: int, rng: random.Random
) -> tuple[History, Faults]:
    history, faults, stop = History(), Faults(), threading.Event()
    threads = [
        threading.Thread(target=client, args=(w, cluster, history, stop, seed), daemon=True)
        for w in range(WORKERS)
    ]
    for thread in threads:
        thread.start()
    try:
        nemesis(cluster, faults, rng, time.monotonic() + seconds, host_kills)
    finally:
        stop.set()
        for thread in threads:
            thread.join(DEADLINE * 3)
    return history, faults


def summary(history: History, faults: Faults) -> list[list[Any]]:
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(history.by_status.items()))
    faults_text = ", ".join(f"{k} {v}" for k, v in sorted(faults.by_kind.items())) or "none"
    return [
        ["tasks accepted", history.accepted, "-"],
        ["answered by status", statuses, "-"],
        ["failed while the host was up", len(history.failed_while_up), "0"],
        ["cut by a host kill (UNAVAILABLE to the caller)", history.cut_by_host_kill, "-"],
        [f"answered after deadline + {LATE_MARGIN:g} s", history.late, "0"],
        ["task ids answered twice", history.duplicates, "0"],
        ["agent faults", faults_text, "-"],
        ["host kills (-9)", faults.host_kills, "-"],
        ["processes left after each host kill", faults.left_after_kill or "-", "0 each"],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chaos", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seed", type=int, default=None, help="replay a nemesis schedule")
    parser.add_argument("--chaos", type=float, default=120.0, help="seconds with host kills")
    parser.add_argument("--host-kills", type=int, default=4)
    parser.add_argument("--soak", type=float, default=360.0, help="seconds without host kills")
    parser.add_argument(
        "--fuzz", type=int, default=10, help="fuzz examples per RPC at the end (0: none)"
    )
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    print(f"chaos: seed {seed} (replay with --seed {seed})", flush=True)
    rng = random.Random(seed)
    began = time.monotonic()
    failures: list[str] = []
    root = REPO / ".ether" / "chaos" / str(seed)  # the hosts' logs stay for a failed run
    shutil.rmtree(root, ignore_errors=True)
    cluster = Cluster(root / "state", root / "logs")
    mail, mail_stop, receiving = Mail(), threading.Event(), threading.Event()
    mailers = [
        threading.Thread(target=sender, args=(cluster, mail, mail_stop), daemon=True),
        threading.Thread(target=receiver, args=(cluster, mail, receiving), daemon=True),
    ]
    for thread in mailers:
        thread.start()
    try:
        print(
            f"chaos: {args.chaos:.0f} s of traffic, agent faults and {args.host_kills} host kills",
            flush=True,
        )
        chaos = phase(cluster, seed, args.chaos, args.host_kills, rng)
        print(f"chaos: {args.soak:.0f} s soak: traffic and agent faults, no host kill", flush=True)
        assert cluster.host is not None
        samples: list[tuple[float, float, int]] = []  # (seconds into the soak, RSS MiB, fds)
        sampling = threading.Event()
        sampler = threading.Thread(
            target=sample_usage, args=(cluster.host.pid, samples, sampling), daemon=True
        )
        sampler.start()
        soak = phase(cluster, seed + 1, args.soak, 0, rng)
        sampling.set()
        sampler.join()
        start_usage = samples[0][1:]
        # The baseline is the host after WARM_UP s of soak traffic: its bounded buffers
        # (event and log histories, topic retention, allocator arenas) fill in the first
        # minute; what grows after that is what a leak would be.
        warm = next((x for x in samples if x[0] >= WARM_UP), samples[0])[1:]
        end_usage = samples[-1][1:]
        mail_stop.set()
        mailers[0].join(DEADLINE * 3)
        drained = time.monotonic() + 60  # what was accepted last still has to arrive
        while mail.lost and time.monotonic() < drained:
            time.sleep(0.2)
        receiving.set()
        mailers[1].join(DEADLINE)
        fuzzed = 0
        if args.fuzz:
            print(f"chaos: fuzzing every RPC, {args.fuzz} examples each", flush=True)
            fuzzed = fuzz.main(
                [cluster.host.address, "--examples", str(args.fuzz), "--agent", "echo-py"]
            )
    except BaseException:
        for path in sorted((root / "logs").glob("*.log")):
            print(f"--- {path.name} (last lines)", file=sys.stderr)
            print("\n".join(path.read_text(errors="replace").splitlines()[-20:]), file=sys.stderr)
        raise
    finally:
        cluster.stop()
    rss_growth = (end_usage[0] - warm[0]) / warm[0]
    fd_growth = (end_usage[1] - warm[1]) / warm[1]
    rows = [[f"chaos: {r[0]}", r[1], r[2]] for r in summary(*chaos)]
    rows += [[f"soak: {r[0]}", r[1], r[2]] for r in summary(*soak) if "host kill" not in r[0]]
    refused = ", ".join(f"{k} {v}" for k, v in sorted(mail.refused.items())) or "none"
    rows += [
        [
            f"fuzzing: {args.fuzz} examples per RPC after the soak (counts printed above)",
            "rule broken" if fuzzed else ("passed" if args.fuzz else "not run"),
            "passed",
        ],
        ["messages accepted by SendMessage (both phases)", len(mail.accepted), "-"],
        ["messages refused (mailbox full: back-pressure)", refused, "-"],
        ["accepted messages lost", len(mail.lost), "0"],
        ["messages delivered twice (at least once across faults)", mail.duplicates, "-"],
        ["receiver lagged past the topic's history", mail.lagged, "0"],
    ]
    if mail.lost:
        failures.append(f"{len(mail.lost)} accepted messages never reached the postbox")
    rows += [
        [
            "agents redeployed by the driver after a host restart",
            cluster.redeploys,
            "0 once deployed agents persist",
        ],
        [
            f"soak: host RSS MiB, start / after {WARM_UP:.0f} s / end (growth after warm-up)",
            f"{start_usage[0]:.0f} / {warm[0]:.0f} / {end_usage[0]:.0f} ({rss_growth:+.0%})",
            "<= +10 %",
        ],
        [
            "soak: host RSS MiB, each minute",
            " ".join(f"{x[1]:.0f}" for x in samples if x[0] // 60 != 0 and int(x[0]) % 60 < 5)
            or "-",
            "-",
        ],
        [
            "soak: host RSS growth after warm-up, MiB a minute (first half / second half)",
            rss_slopes(samples),
            "-",
        ],
        [
            f"soak: host open descriptors, start / after {WARM_UP:.0f} s / end",
            f"{start_usage[1]} / {warm[1]} / {end_usage[1]} ({fd_growth:+.0%})",
            "<= +10 %",
        ],
    ]
    for history, faults, name in ((chaos[0], chaos[1], "chaos"), (soak[0], soak[1], "soak")):
        if history.failed_while_up:
            failures.append(
                f"{name}: {len(history.failed_while_up)} calls failed while the host was up, e.g. {history.failed_while_up[:3]}"
            )
        if history.late:
            failures.append(f"{name}: {history.late} answers came after their deadline")
        if history.duplicates:
            failures.append(f"{name}: {history.duplicates} task ids answered twice")
        if any(faults.left_after_kill):
            failures.append(f"{name}: processes left after host kills: {faults.left_after_kill}")
    if fuzzed:
        failures.append("fuzzing: some answers broke the rule (listed above)")
    if rss_growth > 0.10 or fd_growth > 0.10:
        failures.append(f"soak growth: RSS {rss_growth:+.0%}, descriptors {fd_growth:+.0%}")
    table = markdown_table(["figure", "value", "target"], rows)
    print(table)
    verdict = "PASS" if not failures else "FAIL: " + "; ".join(failures)
    print(f"chaos: {verdict}")
    print(f"chaos: the hosts' logs are in {root / 'logs'}")
    if args.record:
        body = (
            f"Run on {time.strftime('%Y-%m-%d')} by `make chaos` (seed {seed}, {time.monotonic() - began:.0f} s; "
            f"{WORKERS} client threads; deadline {DEADLINE:g} s per call; echo agents in Python, Go and "
            f"TypeScript with 2 replicas each). Verdict: {verdict}.\n\n{table}\n\n### Machine\n\n{machine_markdown()}\n"
        )
        write_section("Reliability", body)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
