"""Runs one test vector (vectors/*.json) against one language's conformance agent.

The driver plays the host: it spawns the agent with the env contract of docs/protocol.md,
does the handshake, sends frames, checks what comes back, and routes ``agent.call`` to a peer
agent. Every wait is bounded; nothing sleeps to wait for readiness. README.md documents the
vector format.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import signal
import time
from pathlib import Path
from typing import Any

from tests.support.procs import wait_gone

from .languages import Prepared
from .matching import Bindings, VectorError, expand, match
from .process import EOF, FRAME, NOISE, AgentProcess, agent_env, describe

VECTORS = Path(__file__).resolve().parent / "vectors"
DEFAULT_TIMEOUT_MS = 10_000
WRITE_TIMEOUT_S = 30.0
# A reply's AgentOutput as the host writes it (agents/model.py, TaskResult.as_json): the
# status's short name, not the proto enum's.
STATUS = {"ok": "SUCCESS", "error": "ERROR", "partial": "PARTIAL"}


class ScenarioFailure(AssertionError):
    """The agent did not behave as the vector says."""


@dataclasses.dataclass
class Scenario:
    name: str
    description: str
    data: dict[str, Any]

    @property
    def agent(self) -> str:
        return str(self.data.get("agent", "conformance"))


def load_scenarios(folder: Path = VECTORS) -> list[Scenario]:
    out = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        out.append(Scenario(data.get("name", path.stem), data.get("description", ""), data))
    return out


def welcome_frame(
    hello: dict[str, Any], env: dict[str, str], extra: dict[str, Any]
) -> dict[str, Any]:
    caps = hello.get("capabilities")
    caps = caps if isinstance(caps, dict) else {}
    frame = {
        "type": "welcome",
        "protocol": hello.get("protocol", 1),
        "host_version": "conformance-driver",
        "max_frame": int(env.get("ETHER_MAX_FRAME", 16 * 1024 * 1024)),
        "max_in_flight": int(caps.get("max_concurrency") or 1),
        "config": {},
        "log_level": "info",
        "agent_name": env.get("ETHER_AGENT_NAME", "conformance"),
    }
    frame.update(extra)
    return frame


class Session:
    """One agent process plus the host-side state of the scenario."""

    def __init__(self, proc: AgentProcess, env: dict[str, str], ignore: set[str]) -> None:
        self.proc = proc
        self.env = env
        self.ignore = ignore


class Runner:
    """Runs ``scenario`` against ``target``; ``peer`` serves routed agent.call."""

    def __init__(self, scenario: Scenario, target: Prepared, peer: Prepared | None = None) -> None:
        self.scenario = scenario
        self.target = target
        self.peer = peer
        self.data = scenario.data
        self.default_timeout = self.data.get("timeout_ms", DEFAULT_TIMEOUT_MS) / 1000
        self.bindings: Bindings = {
            "language": target.language,
            "peer_language": peer.language if peer else target.language,
        }
        self.marks: dict[str, float] = {}
        self.step_no = 0
        self.step: dict[str, Any] = {}
        self.main: Session | None = None
        self.peers: dict[str, Session] = {}
        self._host_ids = itertools.count(1)

    # --- entry ---------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._start()
            for number, step in enumerate(self.data.get("steps", []), start=1):
                self.step_no, self.step = number, step
                self._do(step)
            self.step_no, self.step = 0, {"end": "final barrier"}
            if (
                self.main is not None
                and self.main.proc._stdin_open
                and self.main.proc.proc.poll() is None
            ):
                self._barrier(self.main)
        finally:
            for session in [self.main, *self.peers.values()]:
                if session is not None:
                    session.proc.stop()

    def fail(self, message: str, session: Session | None = None) -> None:
        session = session or self.main
        where = (
            f"step {self.step_no} {json.dumps(self.step)[:300]}" if self.step_no else str(self.step)
        )
        lines = [f"[{self.target.language}/{self.scenario.name}] {where}", message]
        if session is not None:
            proc = session.proc
            lines.append(f"agent: {' '.join(proc.argv)} (pid {proc.pid}, exit {proc.proc.poll()})")
            lines.append("last stdout events:")
            lines += [f"  {h}" for h in proc.history[-12:]] or ["  (none)"]
            tail = proc.stderr_text()[-3000:].rstrip()
            lines.append("stderr tail:")
            lines += [f"  {t}" for t in tail.splitlines()[-40:]] or ["  (empty)"]
        raise ScenarioFailure("\n".join(lines))

    # --- processes -----------------------------------------------------------------------------

    def _spawn(
        self, prepared: Prepared, kind: str, env: dict[str, str], label: str, relay: bool = False
    ) -> AgentProcess:
        argv = prepared.command(kind)
        if not argv:
            self.fail(f"{prepared.language} provides no {kind!r} agent command (see README.md)")
        assert argv is not None
        return AgentProcess(argv, env=env, cwd=prepared.cwd, label=label, relay=relay)

    def _start(self) -> None:
        env = agent_env(self.data.get("env"))
        ignore = set(self.data.get("ignore", ["log"]))
        relay = self.data.get("host") == "relay"
        proc = self._spawn(self.target, self.scenario.agent, env, "agent", relay=relay)
        self.main = Session(proc, env, ignore)
        self.bindings["pid"] = proc.pid
        if self.data.get("handshake", "auto") == "auto":
            self._handshake(self.main, self.data.get("welcome", {}))
        for name in self.data.get("peers", []):
            peer = self.peer or self.target
            penv = agent_env({"ETHER_AGENT_NAME": name})
            session = Session(self._spawn(peer, "conformance", penv, f"peer-{name}"), penv, {"log"})
            self.peers[name] = session
            self._handshake(session, {})

    def _handshake(self, session: Session, extra: dict[str, Any]) -> None:
        hello = self._expect_one(session, {"type": "hello", "protocol": 1}, self.default_timeout)
        if session is self.main:
            self.bindings["hello"] = hello
            self.bindings["agent_pid"] = hello.get("pid")
            if isinstance(hello.get("pid"), int) and hello["pid"] != session.proc.pid:
                session.proc.extra_groups.append(hello["pid"])  # relay mode: the agent's group
        self._send(session, welcome_frame(hello, session.env, extra))

    # --- steps ---------------------------------------------------------------------------------

    def _do(self, step: dict[str, Any]) -> None:
        main = self.main
        assert main is not None
        timeout = step.get("timeout_ms", self.default_timeout * 1000) / 1000
        if "send" in step:
            self._send(main, expand(step["send"], self.bindings))
        elif "send_raw" in step:
            self._write(main, base64.b64decode(step["send_raw"]))
        elif "send_line" in step:
            self._write(main, str(step["send_line"]).encode() + b"\n")
        elif "expect" in step:
            patterns = step["expect"]
            if isinstance(patterns, list):
                frames = self._expect_many(main, patterns, bool(step.get("unordered")), timeout)
            else:
                frames = [self._expect_one(main, patterns, timeout)]
            if "capture" in step:
                self.bindings[step["capture"]] = frames[-1]
        elif "expect_stderr" in step:
            if not main.proc.wait_stderr(step["expect_stderr"], timeout):
                self.fail(f"stderr did not show {step['expect_stderr']!r} within {timeout:.1f} s")
        elif "route_call" in step:
            self._route_call(step["route_call"], timeout)
        elif "close_stdin" in step:
            main.proc.close_stdin()
        elif "signal" in step:
            main.proc.signal(getattr(signal, step["signal"]))
        elif "mark" in step:
            self.marks[step["mark"]] = time.monotonic()
        elif "expect_exit" in step:
            self._expect_exit(main, step)
        elif "barrier" in step:
            self._barrier(main)
        elif "kill_host" in step:
            main.proc.signal(signal.SIGKILL)
            main.proc.wait_exit(5.0)
        elif "expect_gone" in step:
            self._expect_gone(step)
        elif set(step) - {"comment"}:
            raise VectorError(f"unknown step {step}")

    def _write(self, session: Session, data: bytes) -> None:
        error = session.proc.write(data, WRITE_TIMEOUT_S)
        if error:
            self.fail(error, session)

    def _send(self, session: Session, frame: dict[str, Any]) -> None:
        line = json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        self._write(session, line)

    def _next_frame(self, session: Session, deadline: float, waiting_for: str) -> dict[str, Any]:
        while True:
            event = session.proc.next_event(deadline - time.monotonic())
            if event is None:
                self.fail(f"timed out waiting for {waiting_for}", session)
            assert event is not None
            kind, value = event
            if kind == EOF:
                self.fail(f"the agent closed stdout while waiting for {waiting_for}", session)
            if kind == NOISE:
                self.fail(
                    f"stdout carried a line that is not a frame: {describe(kind, value)}", session
                )
            if kind == FRAME and value.get("type") not in session.ignore:
                frame: dict[str, Any] = value
                return frame

    def _expect_one(self, session: Session, pattern: Any, timeout: float) -> dict[str, Any]:
        frame = self._next_frame(session, time.monotonic() + timeout, _short(pattern))
        trial = dict(self.bindings)
        errors = match(pattern, frame, trial)
        if errors:
            self.fail(
                "unexpected frame:\n  got " + describe(FRAME, frame) + "\n  " + "\n  ".join(errors),
                session,
            )
        if session is self.main:
            self.bindings.update(trial)
        return frame

    def _expect_many(
        self, session: Session, patterns: list[Any], unordered: bool, timeout: float
    ) -> list[dict[str, Any]]:
        if not unordered:
            deadline = time.monotonic() + timeout
            return [
                self._expect_one(session, p, max(0.0, deadline - time.monotonic()))
                for p in patterns
            ]
        pending = list(patterns)
        deadline = time.monotonic() + timeout
        frames = []
        while pending:
            frame = self._next_frame(
                session,
                deadline,
                f"{len(pending)} more of {len(patterns)} frames (unordered), e.g. {_short(pending[0])}",
            )
            for i, pattern in enumerate(pending):
                trial = dict(self.bindings)
                if not match(pattern, frame, trial):
                    self.bindings.update(trial)
                    frames.append(frame)
                    del pending[i]
                    break
            else:
                self.fail(
                    f"frame matches none of the {len(pending)} awaited patterns:\n  got "
                    + describe(FRAME, frame)
                    + "\n  awaited e.g. "
                    + _short(pending[0]),
                    session,
                )
        return frames

    def _expect_exit(self, session: Session, step: dict[str, Any]) -> None:
        within = step.get("within_ms", 5000) / 1000
        since = self.marks.get(step["since"]) if "since" in step else time.monotonic()
        if since is None:
            raise VectorError(f"unknown mark {step['since']!r}")
        code = session.proc.wait_exit(since + within - time.monotonic())
        if code is None:
            self.fail(f"the agent did not exit within {within * 1000:.0f} ms", session)
        if code != step["expect_exit"]:
            self.fail(f"the agent exited with {code}, expected {step['expect_exit']}", session)
        deadline = time.monotonic() + 5.0
        while True:  # everything it wrote must have been expected
            event = session.proc.next_event(deadline - time.monotonic())
            if event is None or event[0] == EOF:
                return
            kind, value = event
            if kind == NOISE or value.get("type") not in session.ignore:
                self.fail(f"unexpected output before exit: {describe(kind, value)}", session)

    def _expect_gone(self, step: dict[str, Any]) -> None:
        within = step.get("within_ms", 5000) / 1000
        since = self.marks.get(step["since"]) if "since" in step else time.monotonic()
        if since is None:
            raise VectorError(f"unknown mark {step['since']!r}")
        pids = expand(step["expect_gone"], self.bindings)
        if not all(isinstance(p, int) and p > 1 for p in pids):
            raise VectorError(f"expect_gone needs pids, got {pids!r}")
        # pidfds become readable when their processes exit, also when we are not the parent.
        alive = wait_gone(pids, max(0.0, within - (time.monotonic() - since)))
        if alive:
            self.fail(f"processes {alive} still run {within * 1000:.0f} ms after the host died")

    def _barrier(self, session: Session) -> None:
        """A ping whose pong proves nothing unexpected was written before it."""
        token = f"barrier-{self.step_no}"
        self._send(session, {"type": "ping", "id": token})
        self._expect_one(session, {"type": "pong", "id": token}, self.default_timeout)

    # --- agent.call routing ----------------------------------------------------------------------

    def _route_call(self, name: str, timeout: float) -> None:
        call = self.bindings.get(name)
        if not isinstance(call, dict) or call.get("type") != "call":
            raise VectorError(f"route_call: {name!r} is not a captured call frame")
        params = call.get("params") or {}
        target = str(params.get("agent"))
        session = self.peers.get(target)
        if session is None:
            raise VectorError(f"route_call: no peer named {target!r} (peers: {sorted(self.peers)})")
        host_id = f"h-peer-{next(self._host_ids)}"
        action = params.get("action")
        self._send(
            session,
            {
                "type": "task",
                "id": host_id,
                "action": action,
                "params": params.get("params") or {},
                "deadline_ms": int(timeout * 1000),
                "attempt": 1,
                "trace": {"root_id": "t-root", "parent_id": call.get("task_id", ""), "depth": 1},
                "task_id": f"t-{host_id}",
            },
        )
        result = self._expect_one(session, {"type": "result", "id": host_id}, timeout)
        output: dict[str, Any] = {
            "task_id": f"t-{host_id}",
            "status": STATUS.get(result.get("status", ""), "ERROR"),
            "agent": target,
            "action": action,
            "metadata": {"pid": session.proc.pid, "attempt": 1},
        }
        if "result" in result:
            output["data"] = result["result"]
        if isinstance(result.get("error"), dict):
            err = result["error"]
            output["error"] = {
                k: v
                for k, v in (
                    ("code", err.get("code")),
                    ("message", err.get("message")),
                    ("details", err.get("data")),
                )
                if v
            }
        self._send(self.main, {"type": "reply", "id": call["id"], "status": "ok", "result": output})  # type: ignore[arg-type]


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_scenario(scenario: Scenario, target: Prepared, peer: Prepared | None = None) -> None:
    """Run one scenario; raises ScenarioFailure with a report when the agent misbehaves."""
    Runner(scenario, target, peer).run()
