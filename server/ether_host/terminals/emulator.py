"""The screen of one terminal, fed from its output buffer on demand, off the event loop.

An Emulator knows the output offset up to which it has been fed. A reader
asks it to catch up with a slice of the buffer (taken on the event loop, so
the worker thread never touches the buffer) and the resizes made meanwhile;
large backlogs go through the fast-forward rules first. All methods run in a
worker thread, one call at a time (the session holds a lock around them).
"""

from __future__ import annotations

from dataclasses import dataclass

from ether_host.terminals import fastforward
from ether_host.terminals.model import ExitInfo, ScreenRequest, ScreenView
from ether_host.terminals.screen import (
    SafeStream,
    Sanitizer,
    TermScreen,
    autowrap,
    cursor_of,
    lines_of,
    plain_charset,
    row_text,
    styled_lines,
)

CLEAR_RULE_MIN = 256 * 1024


@dataclass(frozen=True)
class ResizeMark:
    """The terminal was resized when its output reached ``offset``."""

    offset: int
    rows: int
    cols: int


@dataclass
class FeedStats:
    fed: int = 0
    skipped: int = 0
    gaps: int = 0


class Emulator:
    """A TermScreen plus the output offset it reflects."""

    def __init__(self, rows: int, cols: int, scrollback_lines: int) -> None:
        self.screen = TermScreen(cols, rows, scrollback_lines)
        self.stream = SafeStream(self.screen)
        self.sanitizer = Sanitizer()
        self.offset = 0
        self.stats = FeedStats()

    def advance(self, data: bytes, start: int, resizes: list[ResizeMark]) -> None:
        """Feed ``data`` (the output from offset ``start``), applying resizes at their offsets."""
        gap = start > self.offset
        if gap:
            self.stats.gaps += 1
            self._reset_parsing()
            self.offset = start
        position = 0
        for mark in resizes:
            if mark.offset <= self.offset:  # made at the current position, or in a gap
                self.screen.resize(mark.rows, mark.cols)
                continue
            cut = min(len(data), mark.offset - start)
            if cut > position:
                self._feed(data[position:cut], gap)
                gap = False
                position = cut
            if mark.offset <= start + len(data):
                self.screen.resize(mark.rows, mark.cols)
        if position < len(data):
            self._feed(data[position:], gap)
        self.offset = start + len(data)

    def _reset_parsing(self) -> None:
        self.sanitizer.reset()
        self.stream.reset_decoder()
        self.stream._initialize_parser()

    def _feed(self, chunk: bytes, after_gap: bool) -> None:
        plan = None
        screen = self.screen
        full_margins = screen.margins is None or (
            screen.margins.top == 0 and screen.margins.bottom == screen.lines - 1
        )
        ground = self.stream.in_ground_state and not self.sanitizer.holding
        if full_margins and (ground or after_gap):
            history = 0 if screen.alternate else (screen.scrollback.maxlen or 0)
            # Rows for the scrollback are made as text without pyte: only where autowrap is on
            # and the bytes are drawn as themselves (not in DEC special graphics, say).
            as_text = autowrap(screen) and plain_charset(screen)
            plan = fastforward.line_rule(chunk, screen.lines, screen.columns, history, as_text)
        if plan is None and after_gap and len(chunk) >= CLEAR_RULE_MIN:
            plan = fastforward.clear_rule(chunk)
        if plan is None and not after_gap and self._scroll_through(chunk):
            return
        if plan is None:
            self.stream.feed(self.sanitizer.clean(chunk))
            self.stats.fed += len(chunk)
            return
        self._apply(plan)

    def _scroll_through(self, chunk: bytes) -> bool:
        """The scroll rule (fastforward.py) on ``chunk``; False when it cannot apply (nothing
        was fed). Its first line goes through pyte (it may end an escape sequence the last
        chunk began), which then shows whether the rest starts at column 0 of a blank bottom
        row; what follows the last line feed goes through pyte too, so it may be anything."""
        first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
        if (
            len(chunk) < fastforward.SCROLL_RULE_MIN
            or first <= 0
            or chunk[first - 1] != 0x0D
            or not fastforward.line_output(chunk[first + 1 : last + 1])
        ):
            return False
        self.stream.feed(self.sanitizer.clean(chunk[: first + 1]))
        self.stats.fed += first + 1
        rest = chunk[first + 1 :]
        screen = self.screen
        bottom = screen.lines - 1
        plan = None
        if (
            screen.cursor.y == bottom
            and screen.cursor.x == 0
            and not screen.alternate
            and screen.scrollback.maxlen
            and (
                screen.margins is None or (screen.margins.top, screen.margins.bottom) == (0, bottom)
            )
            and self.stream.in_ground_state
            and not self.sanitizer.holding
            and autowrap(screen)
            and plain_charset(screen)
            and not row_text(screen.buffer.get(bottom), screen.columns).strip(" ")
        ):
            plan = fastforward.scroll_rule(rest, screen.lines, screen.columns)
        if plan is None:
            self.stream.feed(self.sanitizer.clean(rest))
            self.stats.fed += len(rest)
            return True
        # What feeding it would scroll away first: the rows above the cursor, as index() does.
        screen.scrollback.extend(
            row_text(screen.buffer.get(row), screen.columns).rstrip(" ") for row in range(bottom)
        )
        self._apply(plan)
        return True

    def _apply(self, plan: fastforward.Plan) -> None:
        screen = self.screen
        self._reset_parsing()
        if plan.clear_screen:
            screen.buffer.clear()
            screen.cursor.x = screen.cursor.y = 0
        self.stream.feed(self.sanitizer.clean(plan.prelude))
        if plan.history_rows is not None:
            screen.scrollback.extend(plan.history_rows)
        self.stream.feed(self.sanitizer.clean(plan.feed))
        self.stats.fed += len(plan.feed)
        self.stats.skipped += plan.skipped

    def render(self, request: ScreenRequest, exit_info: ExitInfo | None) -> ScreenView:
        screen = self.screen
        lines = lines_of(screen, request.keep_trailing_spaces)
        scrollback: list[str] = []
        if request.scrollback:
            held = list(screen.scrollback)
            scrollback = held[-request.scrollback_limit :] if request.scrollback_limit else held
        return ScreenView(
            rows=screen.lines,
            cols=screen.columns,
            lines=lines,
            cursor=cursor_of(screen),
            title=screen.title,
            alternate=screen.alternate,
            output_offset=self.offset,
            scrollback=scrollback,
            styled=styled_lines(screen, lines) if request.styles else None,
            exit=exit_info,
        )

    def cursor_report(self) -> bytes:
        """The reply to a cursor position query (CPR), 1-based."""
        cursor = cursor_of(self.screen)
        return f"\x1b[{cursor.row + 1};{cursor.col + 1}R".encode()
