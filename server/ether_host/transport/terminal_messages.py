"""The Terminal service's messages to and from the core's types (terminals/): a request's input
and wait condition decoded; a terminal, its screen, exit, recording, events and attach stream
encoded, and a terminal another host listed decoded again.

Apart from the servicer (terminal.py) so that it holds the calls alone, as it says: decode, call
the terminal manager, encode. The conversions have no state and no call context; the servicer
reads the caller's identity itself.
"""

from __future__ import annotations

from typing import Any

from ether.v1 import terminal_pb2
from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.reasons import Reason
from ether_host.terminals import (
    AttachItem,
    Exited,
    ExitInfo,
    ExitWait,
    InputSpec,
    Lagged,
    Output,
    OutputWait,
    QuietWait,
    RecordingInfo,
    ScreenView,
    ScreenWait,
    Snapshot,
    TerminalEvent,
    TerminalInfo,
    TerminalState,
    WaitCondition,
    WaitFailure,
    terminal_host,
)
from ether_host.transport import convert

_STATES = {
    TerminalState.RUNNING: terminal_pb2.TERMINAL_STATE_RUNNING,
    TerminalState.EXITED: terminal_pb2.TERMINAL_STATE_EXITED,
    TerminalState.CLOSED: terminal_pb2.TERMINAL_STATE_CLOSED,
}
STATE_NAMES = {v: k for k, v in _STATES.items()}


def seconds(message: Any, name: str) -> float | None:
    return convert.seconds(getattr(message, name)) if message.HasField(name) else None


# -- decoding ------------------------------------------------------------------------------


def input_spec(message: terminal_pb2.TerminalInput, present: bool) -> InputSpec:
    kind = message.WhichOneof("input") if present else None
    common: dict[str, Any] = {"alt": message.alt, "repeat": message.repeat, "paste": message.paste}
    if kind == "data":
        return InputSpec(data=message.data, **common)
    if kind == "text":
        return InputSpec(text=message.text, **common)
    if kind == "key":
        if message.key == terminal_pb2.KEY_UNSPECIFIED:
            raise InvalidArgument(
                "input.key is KEY_UNSPECIFIED; name a key",
                reason=Reason.UNKNOWN_KEY,
                violations=[FieldViolation("input.key", "a named key")],
            )
        return InputSpec(key=terminal_pb2.Key.Name(message.key).removeprefix("KEY_"), **common)
    if kind == "ctrl":
        return InputSpec(ctrl=message.ctrl, **common)
    return InputSpec(**common)


def wait_condition(request: terminal_pb2.WaitForRequest) -> WaitCondition | None:
    kind = request.WhichOneof("condition")
    if kind == "screen":
        return ScreenWait(request.screen.regex, request.screen.include_scrollback)
    if kind == "output":
        output = request.output
        after = output.after_offset if output.HasField("after_offset") else None
        return OutputWait(output.regex, after, output.raw)
    if kind == "exit":
        return ExitWait()
    if kind == "quiet":
        return QuietWait(convert.seconds(request.quiet.duration))
    return None


# -- encoding ------------------------------------------------------------------------------


def exit_message(exit_info: ExitInfo) -> terminal_pb2.ExitStatus:
    message = terminal_pb2.ExitStatus(
        signal=exit_info.signal,
        signal_name=exit_info.signal_name,
        exited_at=convert.timestamp(exit_info.time),
    )
    if exit_info.code is not None:
        message.code = exit_info.code
    return message


def recording_message(info: RecordingInfo) -> terminal_pb2.Recording:
    message = terminal_pb2.Recording(
        active=info.active,
        size=info.size,
        limit=info.limit,
        stopped_reason=info.stopped_reason,
    )
    if info.started_at:
        message.started_at.CopyFrom(convert.timestamp(info.started_at))
    return message


def terminal_message(info: TerminalInfo) -> terminal_pb2.Terminal:
    message = terminal_pb2.Terminal(
        id=info.id,
        name=info.name,
        owner=info.owner,
        argv=list(info.argv),
        cwd=info.cwd,
        rows=info.rows,
        cols=info.cols,
        term=info.term,
        scrollback_lines=info.scrollback_lines,
        state=_STATES[info.state],
        pid=info.pid,
        created_at=convert.timestamp(info.created_at),
        last_activity_at=convert.timestamp(info.last_activity_at),
        output_offset=info.output_offset,
        retained_offset=info.retained_offset,
        attached_clients=info.attached_clients,
        idle_timeout=convert.duration(info.idle_timeout),
        max_lifetime=convert.duration(info.max_lifetime),
        host=terminal_host(info.id),
    )
    if info.exit is not None:
        message.exit_status.CopyFrom(exit_message(info.exit))
    return message


def terminal_info(message: terminal_pb2.Terminal) -> TerminalInfo:
    """A terminal another host listed, as the core pages it with this host's."""
    exit_info = None
    if message.HasField("exit_status"):
        status = message.exit_status
        exit_info = ExitInfo(
            status.code if status.HasField("code") else None,
            status.signal,
            status.exited_at.ToNanoseconds() / 1e9,
        )
    return TerminalInfo(
        id=message.id,
        name=message.name,
        owner=message.owner,
        argv=tuple(message.argv),
        cwd=message.cwd,
        rows=message.rows,
        cols=message.cols,
        term=message.term,
        scrollback_lines=message.scrollback_lines,
        state=STATE_NAMES.get(message.state, TerminalState.RUNNING),
        pid=message.pid,
        created_at=message.created_at.ToNanoseconds() / 1e9,
        last_activity_at=message.last_activity_at.ToNanoseconds() / 1e9,
        exit=exit_info,
        output_offset=message.output_offset,
        retained_offset=message.retained_offset,
        attached_clients=message.attached_clients,
        idle_timeout=convert.seconds(message.idle_timeout),
        max_lifetime=convert.seconds(message.max_lifetime),
    )


def screen_message(view: ScreenView, structured: bool) -> terminal_pb2.Screen:
    message = terminal_pb2.Screen(
        rows=view.rows,
        cols=view.cols,
        lines=view.lines,
        scrollback=view.scrollback,
        output_offset=view.output_offset,
    )
    if not structured:
        return message
    message.cursor.CopyFrom(
        terminal_pb2.Cursor(row=view.cursor.row, col=view.cursor.col, visible=view.cursor.visible)
    )
    message.title = view.title
    message.alternate_screen = view.alternate
    if view.exit is not None:
        message.exited = True
        message.exit_status.CopyFrom(exit_message(view.exit))
    for runs in view.styled or ():
        message.styled_lines.add(
            runs=[
                terminal_pb2.StyledRun(
                    text=r.text,
                    fg=r.fg,
                    bg=r.bg,
                    bold=r.bold,
                    italic=r.italic,
                    underline=r.underline,
                    reverse=r.reverse,
                    strikethrough=r.strikethrough,
                    blink=r.blink,
                )
                for r in runs
            ]
        )
    return message


def failure_message(failure: WaitFailure, structured: bool) -> terminal_pb2.WaitForFailure:
    message = terminal_pb2.WaitForFailure(
        screen=screen_message(failure.screen, structured),
        output_offset=failure.output_offset,
        waited=convert.duration(failure.waited),
    )
    if failure.exit is not None:
        message.exit_status.CopyFrom(exit_message(failure.exit))
    return message


def event_message(event: TerminalEvent) -> terminal_pb2.WatchTerminalsResponse:
    message = terminal_pb2.WatchTerminalsResponse(
        time=convert.timestamp(event.time), terminal=terminal_message(event.terminal)
    )
    if event.kind == "created":
        message.created.SetInParent()
    elif event.kind == "exited":
        assert event.terminal.exit is not None
        message.exited.exit_status.CopyFrom(exit_message(event.terminal.exit))
    else:
        message.closed.reason = event.reason
    return message


def attach_item(item: AttachItem) -> terminal_pb2.AttachResponse:
    if isinstance(item, Output):
        return terminal_pb2.AttachResponse(
            output=terminal_pb2.AttachOutput(offset=item.offset, data=item.data)
        )
    if isinstance(item, Snapshot):
        return terminal_pb2.AttachResponse(
            snapshot=terminal_pb2.AttachSnapshot(
                screen=screen_message(item.view, True), offset=item.offset
            )
        )
    if isinstance(item, Lagged):
        return terminal_pb2.AttachResponse(
            lagged=terminal_pb2.AttachLagged(
                dropped_from=item.dropped_from, dropped_to=item.dropped_to
            )
        )
    assert isinstance(item, Exited)
    return terminal_pb2.AttachResponse(
        exit=terminal_pb2.AttachExit(exit_status=exit_message(item.exit))
    )
