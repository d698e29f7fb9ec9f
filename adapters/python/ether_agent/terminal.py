"""Terminals for agents: the host's ``term.*`` calls as a small API.

A terminal runs a program on a pseudo-terminal on the host; the agent types
into it, reads the emulated screen, and waits for a prompt, a pattern, silence
or the exit instead of sleeping. Terminals belong to the agent and are closed
when it stops. Declare the calls and have the deployment grant them
(``calls = ["term.*"]`` in agent.toml)::

    from ether_agent import Agent, TaskContext
    from ether_agent.terminal import TERMINAL_CALLS, Terminal, run

    agent = Agent("builder", calls=["agent.call", *TERMINAL_CALLS])

    @agent.action(description="Run the tests; report the end of their output.")
    async def test(ctx: TaskContext) -> dict:
        result = await run(ctx, "make test", timeout=600)
        return {"passed": result.exit_code == 0, "tail": result.tail}

    @agent.action(description="Ask Python.")
    async def ask(expression: str, ctx: TaskContext) -> dict:
        async with await Terminal.open(ctx, argv=["python3", "-q"]) as term:
            await term.wait_screen(r">>> $")
            found = await term.type_and_wait(expression + "\\r", output=r"\\n(.*)\\n>>> ")
            return {"answer": found["groups"][0]}

Every method is a coroutine; a sync handler can call ``ctx.host_call_sync`` with
the same methods and params. Errors arrive as ``AgentError`` (codes
``not_found``, ``invalid_params``, ``permission_denied``, ``overloaded``,
``not_ready`` ...). Durations are seconds.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from ._context import TaskContext
from ._errors import AgentError

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
"""Every ``term.*`` method; pass them in ``Agent(calls=[...])``."""


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What ``run`` saw: why it stopped, and the head and tail of the output as text."""

    reason: str
    """"exit", "pattern", "quiet" or "timeout"."""
    head: str
    tail: str
    total_chars: int
    truncated: bool
    """True when head and tail do not cover the whole output (the middle was left out)."""
    exit_code: int | None
    signal: str
    running: bool
    terminal_id: str
    match: str
    groups: list[str]
    raw: dict[str, Any]

    @property
    def output(self) -> str:
        """The whole output when it fit, else head + a marker + tail."""
        if not self.truncated:
            return (
                self.head + self.tail[max(0, len(self.head) + len(self.tail) - self.total_chars) :]
            )
        return f"{self.head}\n[... {self.total_chars - len(self.head) - len(self.tail)} characters ...]\n{self.tail}"

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> RunResult:
        status = reply.get("exit_status") or {}
        return cls(
            reason=str(reply.get("reason") or ""),
            head=str(reply.get("head") or ""),
            tail=str(reply.get("tail") or ""),
            total_chars=int(reply.get("total_chars") or 0),
            truncated=bool(reply.get("truncated")),
            exit_code=status.get("code"),
            signal=str(status.get("signal_name") or ""),
            running=bool(reply.get("running")),
            terminal_id=str(reply.get("terminal_id") or ""),
            match=str(reply.get("match") or ""),
            groups=list(reply.get("groups") or []),
            raw=reply,
        )


def _ms(seconds: float | None) -> int:
    """A reply deadline in milliseconds (0: the task's own deadline)."""
    return 0 if seconds is None else max(1, int(seconds * 1000))


def _until(pattern: str | None, quiet: float | None) -> dict[str, Any]:
    until: dict[str, Any] = {}
    if pattern:
        until["pattern"] = pattern
    if quiet:
        until["quiet"] = quiet
    return until


async def run(
    ctx: TaskContext,
    command: str | None = None,
    *,
    argv: list[str] | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    pattern: str | None = None,
    quiet: float | None = None,
    timeout: float = 60.0,  # noqa: ASYNC109 - sent to the host, which enforces it
    limit: int = 4000,
    keep: bool = False,
) -> RunResult:
    """Run a command in a new terminal until it exits, prints ``pattern`` (a regex) or stays
    quiet for ``quiet`` seconds, at most ``timeout`` seconds.

    The terminal uses TERM=dumb, PAGER=cat and NO_COLOR=1 unless ``env`` says otherwise.
    It is closed when the program has exited (unless ``keep``); a program still running (a
    server that printed its banner) keeps its terminal: ``RunResult.terminal_id``.
    """
    params: dict[str, Any] = {
        "timeout": timeout,
        "limit": limit,
        "keep": keep,
        "until": _until(pattern, quiet),
    }
    if argv is not None:
        params["argv"] = argv
    else:
        params["command"] = command or ""
    if cwd:
        params["cwd"] = cwd
    if env:
        params["env"] = env
    reply = await ctx.host_call("term.run", params, deadline_ms=_ms(timeout + 30))
    return RunResult.from_reply(reply)


class Terminal:
    """A terminal the agent owns. ``async with`` closes it at the end."""

    def __init__(self, ctx: TaskContext, info: dict[str, Any]) -> None:
        self.ctx = ctx
        self.info = info

    @property
    def id(self) -> str:
        return str(self.info["terminal_id"])

    @classmethod
    async def open(
        cls,
        ctx: TaskContext,
        command: str | None = None,
        *,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        rows: int = 0,
        cols: int = 0,
        name: str = "",
        term: str = "",
        idle_timeout: float | None = None,
    ) -> Terminal:
        """Start ``command`` (a shell command line), ``argv``, or the host's shell."""
        params: dict[str, Any] = {"rows": rows, "cols": cols, "name": name, "term": term}
        if argv is not None:
            params["argv"] = argv
        elif command:
            params["command"] = command
        if cwd:
            params["cwd"] = cwd
        if env:
            params["env"] = env
        if idle_timeout:
            params["idle_timeout"] = idle_timeout
        return cls(ctx, await ctx.host_call("term.create", params))

    async def __aenter__(self) -> Terminal:
        return self

    async def __aexit__(self, *_: Any) -> None:
        try:
            await self.close()
        except AgentError as error:
            if error.code != "not_found":  # closed already
                raise

    async def _call(
        self, method: str, params: dict[str, Any] | None = None, wait: float | None = None
    ) -> Any:
        """One ``term.*`` call on this terminal; ``wait``: seconds to wait for the reply."""
        payload = {**(params or {}), "terminal_id": self.id}
        return await self.ctx.host_call(method, payload, deadline_ms=_ms(wait))

    # -- input ---------------------------------------------------------------------------

    async def write(self, text: str) -> None:
        """Type ``text`` (use "\\r" for Enter)."""
        await self._call("term.write", {"text": text})

    async def write_bytes(self, data: bytes) -> None:
        await self._call("term.write", {"data_b64": base64.b64encode(data).decode()})

    async def key(self, name: str, *, repeat: int = 1, alt: bool = False) -> None:
        """Press a named key: Enter, Tab, Escape, Backspace, Up, Down, Left, Right, Home, End,
        Page_Up, Page_Down, Delete, Insert, F1..F12."""
        await self._call("term.write", {"key": name.upper(), "repeat": repeat, "alt": alt})

    async def ctrl(self, letter: str) -> None:
        """Ctrl-<letter>: ``ctrl("c")`` interrupts, ``ctrl("d")`` ends input."""
        await self._call("term.write", {"ctrl": letter})

    async def paste(self, text: str) -> None:
        """Paste ``text`` (bracketed when the program asked for bracketed paste)."""
        await self._call("term.write", {"text": text, "paste": True})

    # -- reading and waiting -----------------------------------------------------------

    async def screen(self, *, scrollback: bool = False) -> dict[str, Any]:
        """The screen: ``lines``, ``cursor``, ``title``, ``alternate_screen``, ``exit_status``..."""
        screen: dict[str, Any] = await self._call("term.read", {"scrollback": scrollback})
        return screen

    async def text(self) -> str:
        """The visible lines joined with newlines."""
        return "\n".join((await self.screen())["lines"])

    async def _wait(self, seconds: float, **condition: Any) -> dict[str, Any]:
        params = {"timeout": seconds, **condition}
        reply: dict[str, Any] = await self._call("term.wait", params, seconds + 30)
        return reply

    async def wait_screen(
        self,
        regex: str,
        *,
        timeout: float = 30.0,  # noqa: ASYNC109 - sent to the host, which enforces it
        scrollback: bool = False,
    ) -> dict[str, Any]:
        """Wait until ``regex`` (MULTILINE) matches the screen. The reply has ``matched``
        (False on timeout or exit, with ``reason``), ``match``, ``groups`` and ``screen``."""
        return await self._wait(timeout, screen=regex, scrollback=scrollback)

    async def wait_output(
        self,
        regex: str,
        *,
        after: int | None = None,
        timeout: float = 30.0,  # noqa: ASYNC109 - sent to the host, which enforces it
        raw: bool = False,
    ) -> dict[str, Any]:
        """Wait until ``regex`` matches output (escape sequences removed unless ``raw``) from
        offset ``after`` on (default: output from now on). ``match_end_offset`` continues."""
        condition: dict[str, Any] = {"output": regex, "raw": raw}
        if after is not None:
            condition["after_offset"] = after
        return await self._wait(timeout, **condition)

    async def wait_exit(self, *, timeout: float = 30.0) -> dict[str, Any]:  # noqa: ASYNC109
        return await self._wait(timeout, exit=True)

    async def wait_quiet(
        self,
        seconds: float,
        *,
        timeout: float = 30.0,  # noqa: ASYNC109 - sent to the host, which enforces it
    ) -> dict[str, Any]:
        """Wait until the program prints nothing for ``seconds``."""
        return await self._wait(timeout, quiet=seconds)

    async def type_and_wait(
        self,
        text: str,
        *,
        output: str,
        timeout: float = 30.0,  # noqa: ASYNC109 - sent to the host, which enforces it
    ) -> dict[str, Any]:
        """Type ``text`` and wait for ``output`` (a regex) in what the program prints next."""
        offset = int((await self._call("term.get"))["output_offset"])
        await self.write(text)
        return await self.wait_output(output, after=offset, timeout=timeout)

    async def run(
        self,
        command: str,
        *,
        pattern: str | None = None,
        quiet: float | None = 1.0,
        timeout: float = 60.0,  # noqa: ASYNC109 - sent to the host, which enforces it
        limit: int = 4000,
    ) -> RunResult:
        """Type ``command`` and Enter into this terminal (a shell), then collect its output until
        ``pattern`` appears or it is quiet for ``quiet`` seconds."""
        params = {"command": command, "timeout": timeout, "limit": limit}
        params["until"] = _until(pattern, quiet)
        reply = await self._call("term.run", params, timeout + 30)
        return RunResult.from_reply(reply)

    # -- control -------------------------------------------------------------------------

    async def resize(self, rows: int, cols: int) -> dict[str, Any]:
        size: dict[str, Any] = await self._call("term.resize", {"rows": rows, "cols": cols})
        return size

    async def signal(self, name: str, *, foreground: bool = False) -> None:
        await self._call("term.signal", {"signal": name, "foreground": foreground})

    async def close(self, *, grace: float | None = None) -> dict[str, Any]:
        """End the program (SIGHUP, then SIGKILL after ``grace``) and remove the terminal."""
        params: dict[str, Any] = {} if grace is None else {"grace": grace}
        info: dict[str, Any] = await self._call("term.close", params)
        return info
