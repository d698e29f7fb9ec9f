import datetime

from ether.v1 import rules_pb2 as _rules_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TerminalState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TERMINAL_STATE_UNSPECIFIED: _ClassVar[TerminalState]
    TERMINAL_STATE_RUNNING: _ClassVar[TerminalState]
    TERMINAL_STATE_EXITED: _ClassVar[TerminalState]
    TERMINAL_STATE_CLOSED: _ClassVar[TerminalState]

class ScreenFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCREEN_FORMAT_UNSPECIFIED: _ClassVar[ScreenFormat]
    SCREEN_FORMAT_TEXT: _ClassVar[ScreenFormat]
    SCREEN_FORMAT_STRUCTURED: _ClassVar[ScreenFormat]

class Key(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEY_UNSPECIFIED: _ClassVar[Key]
    KEY_ENTER: _ClassVar[Key]
    KEY_TAB: _ClassVar[Key]
    KEY_ESCAPE: _ClassVar[Key]
    KEY_BACKSPACE: _ClassVar[Key]
    KEY_UP: _ClassVar[Key]
    KEY_DOWN: _ClassVar[Key]
    KEY_RIGHT: _ClassVar[Key]
    KEY_LEFT: _ClassVar[Key]
    KEY_HOME: _ClassVar[Key]
    KEY_END: _ClassVar[Key]
    KEY_PAGE_UP: _ClassVar[Key]
    KEY_PAGE_DOWN: _ClassVar[Key]
    KEY_DELETE: _ClassVar[Key]
    KEY_INSERT: _ClassVar[Key]
    KEY_F1: _ClassVar[Key]
    KEY_F2: _ClassVar[Key]
    KEY_F3: _ClassVar[Key]
    KEY_F4: _ClassVar[Key]
    KEY_F5: _ClassVar[Key]
    KEY_F6: _ClassVar[Key]
    KEY_F7: _ClassVar[Key]
    KEY_F8: _ClassVar[Key]
    KEY_F9: _ClassVar[Key]
    KEY_F10: _ClassVar[Key]
    KEY_F11: _ClassVar[Key]
    KEY_F12: _ClassVar[Key]
TERMINAL_STATE_UNSPECIFIED: TerminalState
TERMINAL_STATE_RUNNING: TerminalState
TERMINAL_STATE_EXITED: TerminalState
TERMINAL_STATE_CLOSED: TerminalState
SCREEN_FORMAT_UNSPECIFIED: ScreenFormat
SCREEN_FORMAT_TEXT: ScreenFormat
SCREEN_FORMAT_STRUCTURED: ScreenFormat
KEY_UNSPECIFIED: Key
KEY_ENTER: Key
KEY_TAB: Key
KEY_ESCAPE: Key
KEY_BACKSPACE: Key
KEY_UP: Key
KEY_DOWN: Key
KEY_RIGHT: Key
KEY_LEFT: Key
KEY_HOME: Key
KEY_END: Key
KEY_PAGE_UP: Key
KEY_PAGE_DOWN: Key
KEY_DELETE: Key
KEY_INSERT: Key
KEY_F1: Key
KEY_F2: Key
KEY_F3: Key
KEY_F4: Key
KEY_F5: Key
KEY_F6: Key
KEY_F7: Key
KEY_F8: Key
KEY_F9: Key
KEY_F10: Key
KEY_F11: Key
KEY_F12: Key

class Argv(_message.Message):
    __slots__ = ("args",)
    ARGS_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, args: _Optional[_Iterable[str]] = ...) -> None: ...

class ExitStatus(_message.Message):
    __slots__ = ("code", "signal", "signal_name", "exited_at")
    CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_NAME_FIELD_NUMBER: _ClassVar[int]
    EXITED_AT_FIELD_NUMBER: _ClassVar[int]
    code: int
    signal: int
    signal_name: str
    exited_at: _timestamp_pb2.Timestamp
    def __init__(self, code: _Optional[int] = ..., signal: _Optional[int] = ..., signal_name: _Optional[str] = ..., exited_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Terminal(_message.Message):
    __slots__ = ("id", "name", "owner", "argv", "cwd", "rows", "cols", "term", "scrollback_lines", "state", "pid", "created_at", "last_activity_at", "exit_status", "output_offset", "retained_offset", "attached_clients", "idle_timeout", "max_lifetime", "host")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    SCROLLBACK_LINES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_AT_FIELD_NUMBER: _ClassVar[int]
    EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RETAINED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ATTACHED_CLIENTS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_LIFETIME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    owner: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    cwd: str
    rows: int
    cols: int
    term: str
    scrollback_lines: int
    state: TerminalState
    pid: int
    created_at: _timestamp_pb2.Timestamp
    last_activity_at: _timestamp_pb2.Timestamp
    exit_status: ExitStatus
    output_offset: int
    retained_offset: int
    attached_clients: int
    idle_timeout: _duration_pb2.Duration
    max_lifetime: _duration_pb2.Duration
    host: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., owner: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., cwd: _Optional[str] = ..., rows: _Optional[int] = ..., cols: _Optional[int] = ..., term: _Optional[str] = ..., scrollback_lines: _Optional[int] = ..., state: _Optional[_Union[TerminalState, str]] = ..., pid: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_activity_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., exit_status: _Optional[_Union[ExitStatus, _Mapping]] = ..., output_offset: _Optional[int] = ..., retained_offset: _Optional[int] = ..., attached_clients: _Optional[int] = ..., idle_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_lifetime: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., host: _Optional[str] = ...) -> None: ...

class Cursor(_message.Message):
    __slots__ = ("row", "col", "visible")
    ROW_FIELD_NUMBER: _ClassVar[int]
    COL_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_FIELD_NUMBER: _ClassVar[int]
    row: int
    col: int
    visible: bool
    def __init__(self, row: _Optional[int] = ..., col: _Optional[int] = ..., visible: _Optional[bool] = ...) -> None: ...

class StyledRun(_message.Message):
    __slots__ = ("text", "fg", "bg", "bold", "italic", "underline", "reverse", "strikethrough", "blink")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FG_FIELD_NUMBER: _ClassVar[int]
    BG_FIELD_NUMBER: _ClassVar[int]
    BOLD_FIELD_NUMBER: _ClassVar[int]
    ITALIC_FIELD_NUMBER: _ClassVar[int]
    UNDERLINE_FIELD_NUMBER: _ClassVar[int]
    REVERSE_FIELD_NUMBER: _ClassVar[int]
    STRIKETHROUGH_FIELD_NUMBER: _ClassVar[int]
    BLINK_FIELD_NUMBER: _ClassVar[int]
    text: str
    fg: str
    bg: str
    bold: bool
    italic: bool
    underline: bool
    reverse: bool
    strikethrough: bool
    blink: bool
    def __init__(self, text: _Optional[str] = ..., fg: _Optional[str] = ..., bg: _Optional[str] = ..., bold: _Optional[bool] = ..., italic: _Optional[bool] = ..., underline: _Optional[bool] = ..., reverse: _Optional[bool] = ..., strikethrough: _Optional[bool] = ..., blink: _Optional[bool] = ...) -> None: ...

class StyledLine(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[StyledRun]
    def __init__(self, runs: _Optional[_Iterable[_Union[StyledRun, _Mapping]]] = ...) -> None: ...

class Screen(_message.Message):
    __slots__ = ("rows", "cols", "lines", "scrollback", "cursor", "title", "alternate_screen", "exited", "exit_status", "output_offset", "styled_lines")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    SCROLLBACK_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    ALTERNATE_SCREEN_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    STYLED_LINES_FIELD_NUMBER: _ClassVar[int]
    rows: int
    cols: int
    lines: _containers.RepeatedScalarFieldContainer[str]
    scrollback: _containers.RepeatedScalarFieldContainer[str]
    cursor: Cursor
    title: str
    alternate_screen: bool
    exited: bool
    exit_status: ExitStatus
    output_offset: int
    styled_lines: _containers.RepeatedCompositeFieldContainer[StyledLine]
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ..., lines: _Optional[_Iterable[str]] = ..., scrollback: _Optional[_Iterable[str]] = ..., cursor: _Optional[_Union[Cursor, _Mapping]] = ..., title: _Optional[str] = ..., alternate_screen: _Optional[bool] = ..., exited: _Optional[bool] = ..., exit_status: _Optional[_Union[ExitStatus, _Mapping]] = ..., output_offset: _Optional[int] = ..., styled_lines: _Optional[_Iterable[_Union[StyledLine, _Mapping]]] = ...) -> None: ...

class TerminalInput(_message.Message):
    __slots__ = ("data", "text", "key", "ctrl", "alt", "repeat", "paste")
    DATA_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CTRL_FIELD_NUMBER: _ClassVar[int]
    ALT_FIELD_NUMBER: _ClassVar[int]
    REPEAT_FIELD_NUMBER: _ClassVar[int]
    PASTE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    text: str
    key: Key
    ctrl: str
    alt: bool
    repeat: int
    paste: bool
    def __init__(self, data: _Optional[bytes] = ..., text: _Optional[str] = ..., key: _Optional[_Union[Key, str]] = ..., ctrl: _Optional[str] = ..., alt: _Optional[bool] = ..., repeat: _Optional[int] = ..., paste: _Optional[bool] = ...) -> None: ...

class CreateTerminalRequest(_message.Message):
    __slots__ = ("argv", "command_line", "env", "cwd", "rows", "cols", "name", "owner", "scrollback_lines", "term", "idle_timeout", "max_lifetime", "request_id", "record")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGV_FIELD_NUMBER: _ClassVar[int]
    COMMAND_LINE_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SCROLLBACK_LINES_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_LIFETIME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    argv: Argv
    command_line: str
    env: _containers.ScalarMap[str, str]
    cwd: str
    rows: int
    cols: int
    name: str
    owner: str
    scrollback_lines: int
    term: str
    idle_timeout: _duration_pb2.Duration
    max_lifetime: _duration_pb2.Duration
    request_id: str
    record: bool
    def __init__(self, argv: _Optional[_Union[Argv, _Mapping]] = ..., command_line: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., cwd: _Optional[str] = ..., rows: _Optional[int] = ..., cols: _Optional[int] = ..., name: _Optional[str] = ..., owner: _Optional[str] = ..., scrollback_lines: _Optional[int] = ..., term: _Optional[str] = ..., idle_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_lifetime: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., request_id: _Optional[str] = ..., record: _Optional[bool] = ...) -> None: ...

class CreateTerminalResponse(_message.Message):
    __slots__ = ("terminal",)
    TERMINAL_FIELD_NUMBER: _ClassVar[int]
    terminal: Terminal
    def __init__(self, terminal: _Optional[_Union[Terminal, _Mapping]] = ...) -> None: ...

class GetTerminalRequest(_message.Message):
    __slots__ = ("terminal_id",)
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    terminal_id: str
    def __init__(self, terminal_id: _Optional[str] = ...) -> None: ...

class GetTerminalResponse(_message.Message):
    __slots__ = ("terminal",)
    TERMINAL_FIELD_NUMBER: _ClassVar[int]
    terminal: Terminal
    def __init__(self, terminal: _Optional[_Union[Terminal, _Mapping]] = ...) -> None: ...

class ListTerminalsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "owner", "state", "cluster")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    owner: str
    state: TerminalState
    cluster: bool
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., owner: _Optional[str] = ..., state: _Optional[_Union[TerminalState, str]] = ..., cluster: _Optional[bool] = ...) -> None: ...

class ListTerminalsResponse(_message.Message):
    __slots__ = ("terminals", "next_page_token", "unreachable_hosts")
    TERMINALS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    UNREACHABLE_HOSTS_FIELD_NUMBER: _ClassVar[int]
    terminals: _containers.RepeatedCompositeFieldContainer[Terminal]
    next_page_token: str
    unreachable_hosts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, terminals: _Optional[_Iterable[_Union[Terminal, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., unreachable_hosts: _Optional[_Iterable[str]] = ...) -> None: ...

class CloseTerminalRequest(_message.Message):
    __slots__ = ("terminal_id", "grace")
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    terminal_id: str
    grace: _duration_pb2.Duration
    def __init__(self, terminal_id: _Optional[str] = ..., grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CloseTerminalResponse(_message.Message):
    __slots__ = ("terminal",)
    TERMINAL_FIELD_NUMBER: _ClassVar[int]
    terminal: Terminal
    def __init__(self, terminal: _Optional[_Union[Terminal, _Mapping]] = ...) -> None: ...

class WatchTerminalsRequest(_message.Message):
    __slots__ = ("owner", "include_existing")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_EXISTING_FIELD_NUMBER: _ClassVar[int]
    owner: str
    include_existing: bool
    def __init__(self, owner: _Optional[str] = ..., include_existing: _Optional[bool] = ...) -> None: ...

class TerminalCreated(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TerminalExited(_message.Message):
    __slots__ = ("exit_status",)
    EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    exit_status: ExitStatus
    def __init__(self, exit_status: _Optional[_Union[ExitStatus, _Mapping]] = ...) -> None: ...

class TerminalClosed(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class WatchTerminalsResponse(_message.Message):
    __slots__ = ("time", "terminal", "created", "exited", "closed")
    TIME_FIELD_NUMBER: _ClassVar[int]
    TERMINAL_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    terminal: Terminal
    created: TerminalCreated
    exited: TerminalExited
    closed: TerminalClosed
    def __init__(self, time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., terminal: _Optional[_Union[Terminal, _Mapping]] = ..., created: _Optional[_Union[TerminalCreated, _Mapping]] = ..., exited: _Optional[_Union[TerminalExited, _Mapping]] = ..., closed: _Optional[_Union[TerminalClosed, _Mapping]] = ...) -> None: ...

class WriteInputRequest(_message.Message):
    __slots__ = ("terminal_id", "input")
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    terminal_id: str
    input: TerminalInput
    def __init__(self, terminal_id: _Optional[str] = ..., input: _Optional[_Union[TerminalInput, _Mapping]] = ...) -> None: ...

class WriteInputResponse(_message.Message):
    __slots__ = ("bytes_queued", "bytes_pending", "bytes_discarded")
    BYTES_QUEUED_FIELD_NUMBER: _ClassVar[int]
    BYTES_PENDING_FIELD_NUMBER: _ClassVar[int]
    BYTES_DISCARDED_FIELD_NUMBER: _ClassVar[int]
    bytes_queued: int
    bytes_pending: int
    bytes_discarded: int
    def __init__(self, bytes_queued: _Optional[int] = ..., bytes_pending: _Optional[int] = ..., bytes_discarded: _Optional[int] = ...) -> None: ...

class ReadScreenRequest(_message.Message):
    __slots__ = ("terminal_id", "format", "include_scrollback", "scrollback_limit", "include_styles", "keep_trailing_spaces")
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SCROLLBACK_FIELD_NUMBER: _ClassVar[int]
    SCROLLBACK_LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_STYLES_FIELD_NUMBER: _ClassVar[int]
    KEEP_TRAILING_SPACES_FIELD_NUMBER: _ClassVar[int]
    terminal_id: str
    format: ScreenFormat
    include_scrollback: bool
    scrollback_limit: int
    include_styles: bool
    keep_trailing_spaces: bool
    def __init__(self, terminal_id: _Optional[str] = ..., format: _Optional[_Union[ScreenFormat, str]] = ..., include_scrollback: _Optional[bool] = ..., scrollback_limit: _Optional[int] = ..., include_styles: _Optional[bool] = ..., keep_trailing_spaces: _Optional[bool] = ...) -> None: ...

class ReadScreenResponse(_message.Message):
    __slots__ = ("screen",)
    SCREEN_FIELD_NUMBER: _ClassVar[int]
    screen: Screen
    def __init__(self, screen: _Optional[_Union[Screen, _Mapping]] = ...) -> None: ...

class ResizeRequest(_message.Message):
    __slots__ = ("terminal_id", "rows", "cols")
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    terminal_id: str
    rows: int
    cols: int
    def __init__(self, terminal_id: _Optional[str] = ..., rows: _Optional[int] = ..., cols: _Optional[int] = ...) -> None: ...

class ResizeResponse(_message.Message):
    __slots__ = ("rows", "cols")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    rows: int
    cols: int
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ...) -> None: ...

class SendSignalRequest(_message.Message):
    __slots__ = ("terminal_id", "signal", "foreground")
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    FOREGROUND_FIELD_NUMBER: _ClassVar[int]
    terminal_id: str
    signal: str
    foreground: bool
    def __init__(self, terminal_id: _Optional[str] = ..., signal: _Optional[str] = ..., foreground: _Optional[bool] = ...) -> None: ...

class SendSignalResponse(_message.Message):
    __slots__ = ("signal", "process_group")
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    PROCESS_GROUP_FIELD_NUMBER: _ClassVar[int]
    signal: int
    process_group: int
    def __init__(self, signal: _Optional[int] = ..., process_group: _Optional[int] = ...) -> None: ...

class ScreenCondition(_message.Message):
    __slots__ = ("regex", "include_scrollback")
    REGEX_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SCROLLBACK_FIELD_NUMBER: _ClassVar[int]
    regex: str
    include_scrollback: bool
    def __init__(self, regex: _Optional[str] = ..., include_scrollback: _Optional[bool] = ...) -> None: ...

class OutputCondition(_message.Message):
    __slots__ = ("regex", "after_offset", "raw")
    REGEX_FIELD_NUMBER: _ClassVar[int]
    AFTER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RAW_FIELD_NUMBER: _ClassVar[int]
    regex: str
    after_offset: int
    raw: bool
    def __init__(self, regex: _Optional[str] = ..., after_offset: _Optional[int] = ..., raw: _Optional[bool] = ...) -> None: ...

class ExitCondition(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QuietCondition(_message.Message):
    __slots__ = ("duration",)
    DURATION_FIELD_NUMBER: _ClassVar[int]
    duration: _duration_pb2.Duration
    def __init__(self, duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WaitForRequest(_message.Message):
    __slots__ = ("terminal_id", "screen", "output", "exit", "quiet", "timeout", "screen_format")
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCREEN_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    QUIET_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    SCREEN_FORMAT_FIELD_NUMBER: _ClassVar[int]
    terminal_id: str
    screen: ScreenCondition
    output: OutputCondition
    exit: ExitCondition
    quiet: QuietCondition
    timeout: _duration_pb2.Duration
    screen_format: ScreenFormat
    def __init__(self, terminal_id: _Optional[str] = ..., screen: _Optional[_Union[ScreenCondition, _Mapping]] = ..., output: _Optional[_Union[OutputCondition, _Mapping]] = ..., exit: _Optional[_Union[ExitCondition, _Mapping]] = ..., quiet: _Optional[_Union[QuietCondition, _Mapping]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., screen_format: _Optional[_Union[ScreenFormat, str]] = ...) -> None: ...

class WaitForResponse(_message.Message):
    __slots__ = ("screen", "match", "groups", "match_start_offset", "match_end_offset", "output_offset", "exit_status", "waited")
    SCREEN_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    MATCH_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MATCH_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    WAITED_FIELD_NUMBER: _ClassVar[int]
    screen: Screen
    match: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    match_start_offset: int
    match_end_offset: int
    output_offset: int
    exit_status: ExitStatus
    waited: _duration_pb2.Duration
    def __init__(self, screen: _Optional[_Union[Screen, _Mapping]] = ..., match: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., match_start_offset: _Optional[int] = ..., match_end_offset: _Optional[int] = ..., output_offset: _Optional[int] = ..., exit_status: _Optional[_Union[ExitStatus, _Mapping]] = ..., waited: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WaitForFailure(_message.Message):
    __slots__ = ("screen", "output_offset", "exit_status", "waited")
    SCREEN_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    WAITED_FIELD_NUMBER: _ClassVar[int]
    screen: Screen
    output_offset: int
    exit_status: ExitStatus
    waited: _duration_pb2.Duration
    def __init__(self, screen: _Optional[_Union[Screen, _Mapping]] = ..., output_offset: _Optional[int] = ..., exit_status: _Optional[_Union[ExitStatus, _Mapping]] = ..., waited: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AttachStart(_message.Message):
    __slots__ = ("terminal_id", "from_offset", "read_only")
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    terminal_id: str
    from_offset: int
    read_only: bool
    def __init__(self, terminal_id: _Optional[str] = ..., from_offset: _Optional[int] = ..., read_only: _Optional[bool] = ...) -> None: ...

class AttachResize(_message.Message):
    __slots__ = ("rows", "cols")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    rows: int
    cols: int
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ...) -> None: ...

class AttachSignal(_message.Message):
    __slots__ = ("signal", "foreground")
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    FOREGROUND_FIELD_NUMBER: _ClassVar[int]
    signal: str
    foreground: bool
    def __init__(self, signal: _Optional[str] = ..., foreground: _Optional[bool] = ...) -> None: ...

class AttachRequest(_message.Message):
    __slots__ = ("start", "input", "resize", "signal")
    START_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    RESIZE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    start: AttachStart
    input: TerminalInput
    resize: AttachResize
    signal: AttachSignal
    def __init__(self, start: _Optional[_Union[AttachStart, _Mapping]] = ..., input: _Optional[_Union[TerminalInput, _Mapping]] = ..., resize: _Optional[_Union[AttachResize, _Mapping]] = ..., signal: _Optional[_Union[AttachSignal, _Mapping]] = ...) -> None: ...

class AttachStarted(_message.Message):
    __slots__ = ("terminal", "read_only", "resumed")
    TERMINAL_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    terminal: Terminal
    read_only: bool
    resumed: bool
    def __init__(self, terminal: _Optional[_Union[Terminal, _Mapping]] = ..., read_only: _Optional[bool] = ..., resumed: _Optional[bool] = ...) -> None: ...

class AttachSnapshot(_message.Message):
    __slots__ = ("screen", "offset")
    SCREEN_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    screen: Screen
    offset: int
    def __init__(self, screen: _Optional[_Union[Screen, _Mapping]] = ..., offset: _Optional[int] = ...) -> None: ...

class AttachOutput(_message.Message):
    __slots__ = ("offset", "data")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    offset: int
    data: bytes
    def __init__(self, offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class AttachExit(_message.Message):
    __slots__ = ("exit_status",)
    EXIT_STATUS_FIELD_NUMBER: _ClassVar[int]
    exit_status: ExitStatus
    def __init__(self, exit_status: _Optional[_Union[ExitStatus, _Mapping]] = ...) -> None: ...

class AttachLagged(_message.Message):
    __slots__ = ("dropped_from", "dropped_to")
    DROPPED_FROM_FIELD_NUMBER: _ClassVar[int]
    DROPPED_TO_FIELD_NUMBER: _ClassVar[int]
    dropped_from: int
    dropped_to: int
    def __init__(self, dropped_from: _Optional[int] = ..., dropped_to: _Optional[int] = ...) -> None: ...

class AttachResponse(_message.Message):
    __slots__ = ("started", "snapshot", "output", "exit", "lagged")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    LAGGED_FIELD_NUMBER: _ClassVar[int]
    started: AttachStarted
    snapshot: AttachSnapshot
    output: AttachOutput
    exit: AttachExit
    lagged: AttachLagged
    def __init__(self, started: _Optional[_Union[AttachStarted, _Mapping]] = ..., snapshot: _Optional[_Union[AttachSnapshot, _Mapping]] = ..., output: _Optional[_Union[AttachOutput, _Mapping]] = ..., exit: _Optional[_Union[AttachExit, _Mapping]] = ..., lagged: _Optional[_Union[AttachLagged, _Mapping]] = ...) -> None: ...

class Recording(_message.Message):
    __slots__ = ("active", "size", "limit", "started_at", "stopped_reason")
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STOPPED_REASON_FIELD_NUMBER: _ClassVar[int]
    active: bool
    size: int
    limit: int
    started_at: _timestamp_pb2.Timestamp
    stopped_reason: str
    def __init__(self, active: _Optional[bool] = ..., size: _Optional[int] = ..., limit: _Optional[int] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., stopped_reason: _Optional[str] = ...) -> None: ...

class SetRecordingRequest(_message.Message):
    __slots__ = ("terminal_id", "record")
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    terminal_id: str
    record: bool
    def __init__(self, terminal_id: _Optional[str] = ..., record: _Optional[bool] = ...) -> None: ...

class SetRecordingResponse(_message.Message):
    __slots__ = ("recording",)
    RECORDING_FIELD_NUMBER: _ClassVar[int]
    recording: Recording
    def __init__(self, recording: _Optional[_Union[Recording, _Mapping]] = ...) -> None: ...

class GetRecordingRequest(_message.Message):
    __slots__ = ("terminal_id", "offset", "max_bytes")
    TERMINAL_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    terminal_id: str
    offset: int
    max_bytes: int
    def __init__(self, terminal_id: _Optional[str] = ..., offset: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class GetRecordingResponse(_message.Message):
    __slots__ = ("data", "offset", "recording")
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDING_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    offset: int
    recording: Recording
    def __init__(self, data: _Optional[bytes] = ..., offset: _Optional[int] = ..., recording: _Optional[_Union[Recording, _Mapping]] = ...) -> None: ...
