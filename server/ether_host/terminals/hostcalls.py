"""``term.*`` host calls: agents use terminals they own, closed when the agent stops.

An agent's terminals belong to ``agent:<name>``, with every terminal right but
the admin one, and count against the per-owner limit like anyone's. Calls and
replies are JSON; sizes and offsets are integers, durations are seconds.

| method        | params                                                     | result                      |
|---------------|------------------------------------------------------------|-----------------------------|
| term.create   | argv or command, env, cwd, rows, cols, name, term, ...     | terminal                    |
| term.list     | -                                                          | {terminals}                 |
| term.get      | terminal_id                                                | terminal                    |
| term.write    | terminal_id, text / data_b64 / key / ctrl, alt, repeat, paste | {bytes_queued, bytes_pending, bytes_discarded} |
| term.read     | terminal_id, scrollback, scrollback_limit                  | screen                      |
| term.wait     | terminal_id, one of screen / output / exit / quiet, timeout | {matched, reason, ...}     |
| term.resize   | terminal_id, rows, cols                                    | {rows, cols}                |
| term.signal   | terminal_id, signal, foreground                            | {signal, process_group}     |
| term.close    | terminal_id, grace                                         | terminal                    |
| term.run      | command or argv (or terminal_id + command), until, timeout | {reason, head, tail, ...}   |

In a cluster, a terminal_id of another host's terminal is refused with TERMINAL_ON_OTHER_HOST
naming that host and its address: an agent's calls are not forwarded (its identity,
``agent:<name>``, is this host's, not a token the other host would take).
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ether_host.agents import RunningTask
from ether_host.auth import Identity
from ether_host.errors import FieldViolation, InvalidArgument, NotFound
from ether_host.reasons import Reason
from ether_host.sandbox import Grant, SandboxSettings
from ether_host.supervisor import State, Supervisor
from ether_host.terminals.keys import InputSpec
from ether_host.terminals.manager import TerminalManager
from ether_host.terminals.matching import HeadTail, OutputMatcher, compile_regex
from ether_host.terminals.model import ExitInfo, ScreenRequest, ScreenView, TerminalInfo
from ether_host.terminals.requests import CreateSpec
from ether_host.terminals.rights import AGENT_RIGHTS
from ether_host.terminals.terminal import Terminal
from ether_host.terminals.waiting import (
    ExitWait,
    OutputWait,
    QuietWait,
    ScreenWait,
    WaitCondition,
    WaitFailed,
    WaitTimedOut,
)

OWNER_PREFIX = "agent:"
GONE = {State.STOPPED, State.EXITED, State.FATAL}
RUN_DEFAULT_TIMEOUT = 60.0
RUN_DEFAULT_LIMIT = 4000
RUN_MAX_LIMIT = 1_000_000
RUN_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "NO_COLOR": "1"}
RUN_SLICE = 1024 * 1024
# Every term.* host call, the host's one list (the SDKs' lists must equal it: docs/protocol.md).
TERMINAL_CALLS = (
    "term.create",
    "term.list",
    "term.get",
    "term.write",
    "term.read",
    "term.wait",
    "term.resize",
    "term.signal",
    "term.close",
    "term.run",
)

Handler = Callable[[Identity, dict[str, Any]], Awaitable[Any]]


def agent_identity(agent: str) -> Identity:
    return Identity(f"{OWNER_PREFIX}{agent}", AGENT_RIGHTS)


class AgentTerminals:
    """Serves ``term.*`` calls and closes an agent's terminals when it stops."""

    def __init__(self, manager: TerminalManager, supervisor: Supervisor) -> None:
        self.manager = manager
        self.supervisor = supervisor
        # One list: TERMINAL_CALLS names the calls, ``_<verb>`` serves ``term.<verb>``; the SDKs'
        # lists are held to it by tests/conformance (vectors/host_calls.json, test_host_calls.py).
        self._methods: dict[str, Handler] = {
            method: getattr(self, "_" + method.removeprefix("term.")) for method in TERMINAL_CALLS
        }
        manager.run_in_background(self.watch_agents)
        manager.owner_gone = self._owner_gone
        clients = manager.sandbox_for
        # An agent's terminals get the agent's sandbox (its network and paths, not its folder);
        # none only where the host config turned sandboxes off.
        manager.sandbox_for = lambda owner: (
            self._sandbox_of(owner[len(OWNER_PREFIX) :])
            if owner.startswith(OWNER_PREFIX)
            else clients(owner)
        )

    def _sandbox_of(self, agent: str) -> tuple[Grant, SandboxSettings] | None:
        found = self.supervisor.agents.get(agent)
        if found is None or found.grant is None:
            return None
        return found.grant, self.supervisor.sandbox

    def _owner_gone(self, owner: str) -> bool:
        """Whether ``owner`` is an agent that is gone (watch_agents' rule), now."""
        if not owner.startswith(OWNER_PREFIX):
            return False
        agent = self.supervisor.agents.get(owner[len(OWNER_PREFIX) :])
        return agent is None or agent.state in GONE

    async def handle(self, caller: RunningTask, method: str, params: dict[str, Any]) -> Any:
        """The Dispatcher's call handler for ``term.*``."""
        handler = self._methods.get(method)
        if handler is None:
            raise NotFound(
                f"no host call {method!r}; terminal calls are {', '.join(TERMINAL_CALLS)}",
                reason=Reason.UNKNOWN_CALL,
            )
        terminal_id = params.get("terminal_id")
        if isinstance(terminal_id, str):  # another host's terminal: an error naming it, no hop
            await self.manager.placement.refuse_elsewhere(terminal_id)
        return await handler(agent_identity(caller.agent), params)

    async def watch_agents(self) -> None:
        """Close the terminals of agents that stopped, exited for good or went FATAL."""
        events = self.supervisor.events
        async for _, event in events.follow(events.last_sequence):
            if event.state not in GONE:
                continue
            owner = f"{OWNER_PREFIX}{event.agent}"
            mine = any(s.owner == owner for s in self.manager.sessions.values())
            if mine and self._owner_gone(owner):
                self.manager.spawn(self.manager.close_owner, owner, "owner_gone")

    # -- calls ---------------------------------------------------------------------------

    async def _create(self, identity: Identity, params: dict[str, Any]) -> Any:
        return terminal_json(await self.manager.create(identity, _create_spec(params)))

    async def _list(self, identity: Identity, params: dict[str, Any]) -> Any:
        return {"terminals": [terminal_json(i) for i in self.manager.list(identity)]}

    async def _get(self, identity: Identity, params: dict[str, Any]) -> Any:
        return terminal_json(self.manager.get(identity, _id(params)))

    async def _write(self, identity: Identity, params: dict[str, Any]) -> Any:
        accepted = self.manager.write(identity, _id(params), _input(params))
        return {
            "bytes_queued": accepted.queued,
            "bytes_pending": accepted.pending,
            "bytes_discarded": accepted.discarded,
        }

    async def _read(self, identity: Identity, params: dict[str, Any]) -> Any:
        request = ScreenRequest(
            scrollback=bool(params.get("scrollback")),
            scrollback_limit=_int(params, "scrollback_limit", 0),
        )
        return screen_json(await self.manager.read_screen(identity, _id(params), request))

    async def _wait(self, identity: Identity, params: dict[str, Any]) -> Any:
        timeout = _float(params, "timeout", 30.0)
        try:
            result = await self.manager.wait_for(
                identity, _id(params), _condition(params), timeout, ScreenRequest()
            )
        except WaitFailed as error:
            failure = error.failure
            return {
                "matched": False,
                "reason": "timeout" if isinstance(error, WaitTimedOut) else "exited",
                "screen": screen_json(failure.screen),
                "output_offset": failure.output_offset,
                "exit_status": exit_json(failure.exit),
                "waited": round(failure.waited, 3),
            }
        return {
            "matched": True,
            "reason": "matched",
            "match": result.match,
            "groups": list(result.groups),
            "match_start_offset": result.start_offset,
            "match_end_offset": result.end_offset,
            "screen": screen_json(result.screen),
            "output_offset": result.output_offset,
            "exit_status": exit_json(result.exit),
            "waited": round(result.waited, 3),
        }

    async def _resize(self, identity: Identity, params: dict[str, Any]) -> Any:
        rows, cols = self.manager.resize(
            identity, _id(params), _int(params, "rows", 0), _int(params, "cols", 0)
        )
        return {"rows": rows, "cols": cols}

    async def _signal(self, identity: Identity, params: dict[str, Any]) -> Any:
        signum, group = self.manager.send_signal(
            identity, _id(params), str(params.get("signal") or ""), bool(params.get("foreground"))
        )
        return {"signal": signum, "process_group": group}

    async def _close(self, identity: Identity, params: dict[str, Any]) -> Any:
        grace = _float(params, "grace", None)
        return terminal_json(await self.manager.close(identity, _id(params), grace))

    async def _run(self, identity: Identity, params: dict[str, Any]) -> Any:
        """Run a command; wait until it exits, goes quiet or prints a pattern; return head and tail."""
        until = params.get("until") or {}
        if not isinstance(until, dict):
            raise _invalid("until", "an object with pattern, quiet and/or exit")
        pattern = (
            compile_regex(str(until["pattern"]), "until.pattern") if until.get("pattern") else None
        )
        quiet = _float(until, "quiet", None)
        if quiet is not None and quiet <= 0:
            raise _invalid("until.quiet", "a positive number of seconds")
        timeout = _float(params, "timeout", RUN_DEFAULT_TIMEOUT)
        limit = _int(params, "limit", RUN_DEFAULT_LIMIT)
        if not 1 <= limit <= RUN_MAX_LIMIT:
            raise _invalid("limit", f"1 to {RUN_MAX_LIMIT} characters")
        manager = self.manager
        created = not params.get("terminal_id")
        if created:
            spec = _create_spec(
                {"term": "dumb", **params, "env": {**RUN_ENV, **(params.get("env") or {})}}
            )
            session = manager.find(
                identity, (await manager.create(identity, spec)).id, "terminal.read"
            )
            start = 0
        else:
            session = manager.find(identity, _id(params), "terminal.write")
            command = str(params.get("command") or "")
            if not command:
                raise _invalid("command", "the command line to type into the terminal")
            start = session.buffer.end
            manager.write(identity, session.id, InputSpec(text=command + "\r"))
        outcome = await _collect(session, start, pattern, quiet, timeout, limit)
        if created and session.exit is not None and not params.get("keep"):
            await manager.close(identity, session.id, 0.5)
        outcome["terminal_id"] = session.id
        outcome["closed"] = session.closed
        return outcome


async def _collect(
    session: Terminal, start: int, pattern: Any, quiet: float | None, within: float, limit: int
) -> dict[str, Any]:
    started = time.monotonic()
    deadline = started + within
    output = HeadTail(start, limit)
    matcher = OutputMatcher(pattern, start, False) if pattern is not None else None
    position = start
    lost = 0
    found = None
    buffer = session.buffer
    while True:
        changed = session.changed.waiter()
        finished = session.finished.is_set()
        while buffer.end > position:
            if position < buffer.start:
                lost += buffer.start - position
                position = buffer.start
                matcher = OutputMatcher(pattern, position, False) if pattern is not None else None
            data = buffer.read(position, RUN_SLICE)
            position += len(data)
            output.feed(data)
            if matcher is not None and found is None:
                found = matcher.feed(data)
        now = time.monotonic()
        quiet_due = (
            max(started, session.last_output_clock) + quiet if quiet is not None else float("inf")
        )
        reason = (
            "pattern"
            if found is not None
            else "exit"
            if finished
            else "quiet"
            if now >= quiet_due
            else "timeout"
            if now >= deadline
            else ""
        )
        if reason:
            break
        with anyio.move_on_after(min(deadline, quiet_due) - now):
            await changed.wait()
    result: dict[str, Any] = {
        "reason": reason,
        "head": output.head,
        "tail": output.tail,
        "total_chars": output.total,
        "truncated": output.truncated,
        "lost_bytes": lost,
        "output_offset": position,
        "exit_status": exit_json(session.exit),
        "running": session.exit is None,
        "waited": round(time.monotonic() - started, 3),
    }
    if found is not None:
        result["match"] = found.text
        result["groups"] = list(found.groups)
    return result


# -- params ------------------------------------------------------------------------------


def _invalid(field: str, what: str) -> InvalidArgument:
    return InvalidArgument(
        f"{field}: expected {what}",
        reason=Reason.INVALID_PARAMS,
        violations=[FieldViolation(field, what)],
    )


def _id(params: dict[str, Any]) -> str:
    value = params.get("terminal_id")
    if not isinstance(value, str) or not value:
        raise _invalid("terminal_id", "the id of a terminal (term.create returns it)")
    return value


def _int(params: dict[str, Any], key: str, default: int) -> int:
    value = params.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise _invalid(key, "an integer")
    return int(value)


def _float(params: dict[str, Any], key: str, default: Any) -> Any:
    value = params.get(key, default)
    if value is None or value is default:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(key, "a number of seconds")
    return float(value)


def _create_spec(params: dict[str, Any]) -> CreateSpec:
    argv = params.get("argv")
    if argv is not None and (
        not isinstance(argv, list) or not all(isinstance(a, str) for a in argv)
    ):
        raise _invalid("argv", "an array of strings")
    env = params.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise _invalid("env", "an object of strings")
    return CreateSpec(
        argv=tuple(argv) if argv is not None else None,
        command_line=str(params.get("command") or ""),
        env=dict(env),
        cwd=str(params.get("cwd") or ""),
        rows=_int(params, "rows", 0),
        cols=_int(params, "cols", 0),
        name=str(params.get("name") or ""),
        scrollback_lines=_int(params, "scrollback_lines", 0),
        term=str(params.get("term") or ""),
        idle_timeout=_float(params, "idle_timeout", None),
        max_lifetime=_float(params, "max_lifetime", None),
        request_id=str(params.get("request_id") or ""),
    )


def _input(params: dict[str, Any]) -> InputSpec:
    alt, repeat, paste = (
        bool(params.get("alt")),
        _int(params, "repeat", 0),
        bool(params.get("paste")),
    )
    if params.get("data_b64") is not None:
        try:
            data = base64.b64decode(str(params["data_b64"]), validate=True)
        except (binascii.Error, ValueError):
            raise _invalid("data_b64", "base64 bytes") from None
        return InputSpec(data=data, alt=alt, repeat=repeat, paste=paste)
    text = params.get("text")
    key = params.get("key")
    ctrl = params.get("ctrl")
    return InputSpec(
        text=None if text is None else str(text),
        key=None if key is None else str(key),
        ctrl=None if ctrl is None else str(ctrl),
        alt=alt,
        repeat=repeat,
        paste=paste,
    )


def _condition(params: dict[str, Any]) -> WaitCondition | None:
    if params.get("screen"):
        return ScreenWait(str(params["screen"]), bool(params.get("scrollback")))
    if params.get("output"):
        after = params.get("after_offset")
        return OutputWait(
            str(params["output"]),
            None if after is None else _int(params, "after_offset", 0),
            bool(params.get("raw")),
        )
    if params.get("exit"):
        return ExitWait()
    if params.get("quiet") is not None:
        return QuietWait(_float(params, "quiet", None))
    return None


# -- results -----------------------------------------------------------------------------


def exit_json(exit_info: ExitInfo | None) -> dict[str, Any] | None:
    if exit_info is None:
        return None
    return {
        "code": exit_info.code,
        "signal": exit_info.signal,
        "signal_name": exit_info.signal_name,
    }


def terminal_json(info: TerminalInfo) -> dict[str, Any]:
    return {
        "terminal_id": info.id,
        "name": info.name,
        "owner": info.owner,
        "argv": list(info.argv),
        "cwd": info.cwd,
        "rows": info.rows,
        "cols": info.cols,
        "state": info.state.value.lower(),
        "pid": info.pid,
        "output_offset": info.output_offset,
        "exit_status": exit_json(info.exit),
    }


def screen_json(view: ScreenView) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rows": view.rows,
        "cols": view.cols,
        "lines": view.lines,
        "cursor": {"row": view.cursor.row, "col": view.cursor.col, "visible": view.cursor.visible},
        "title": view.title,
        "alternate_screen": view.alternate,
        "output_offset": view.output_offset,
        "exited": view.exit is not None,
        "exit_status": exit_json(view.exit),
    }
    if view.scrollback:
        out["scrollback"] = view.scrollback
    return out
