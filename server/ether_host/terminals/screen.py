"""pyte, wrapped so that full-screen programs render as tmux renders them.

pyte 0.8.2 is the emulator (a subclass each of its Screen and ByteStream, no
fork). On top of it:

- ``feed`` never throws: a handler that fails is counted and skipped, and the
  parser carries on with the next character.
- Private-mode variants (``ESC[?4m`` from vim, ``ESC[?r``) are accepted and
  ignored instead of raising TypeError and dropping the rest of the chunk.
- The alternate screen (modes 1049, 1047, 47) switches buffers as xterm and
  tmux do; 1049 also saves and restores the cursor.
- Sequences pyte would misread are removed before it sees them: DCS/APC/PM
  strings, CSI with ``<``/``=``/``>`` parameters or intermediate bytes, and
  colon sub-parameters (pyte would draw their tail as text).
- REP (repeat last character), SU/SD (scroll up/down) and ED 3 (erase
  scrollback) are implemented; DECSC keeps one slot as xterm does; DECCOLM
  clears the screen without switching to 132 columns (as tmux).
- Scrollback is kept as text lines (pyte's HistoryScreen keeps a Char object
  per cell: ~150 bytes each), filled when lines scroll off the top of the
  primary screen.
- Zero-width characters join the cell before them as written (pyte normalised them
  and stopped at the first one that is not a combining mark), and a wide character
  that does not fit at the end of a line wraps whole, as tmux does.
- Shrinking the screen drops empty rows below the cursor first, then rows
  from the top into the scrollback, as tmux does (pyte drops the top rows).
- The G0/G1 character sets (``ESC ( 0``, ``ESC ) 0``, ``ESC ( B``, SI, SO) work
  in UTF-8 too, as in tmux and xterm: ncurses draws boxes with them under
  TERM=xterm-256color. pyte ignores them while its stream is in UTF-8 mode;
  the cells get the characters tmux shows for DEC special graphics.
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict, deque
from collections.abc import Mapping
from typing import Any

import pyte
from pyte import charsets as cs
from pyte import modes as mo
from pyte.screens import Char, Margins, StaticDefaultDict, wcwidth

from ether_host.terminals.model import Cursor, Run

ALT_MODES = {1049 << 5, 1047 << 5, 47 << 5}
SAVE_CURSOR_MODE = 1048 << 5
ALT_WITH_CURSOR = 1049 << 5
DECCOLM = 3 << 5

# A complete escape sequence starting at an ESC (used to hold back a cut one).
_COMPLETE = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[PX^_].*?\x1b\\|[ -/]*[0-~])", re.S
)
# Sequences pyte misparses (it would draw their tail as text); removed before it sees them.
_DROP = re.compile(
    rb"\x1b[PX^_].*?\x1b\\"  # DCS, SOS, PM, APC strings
    rb"|\x1b\[[<=>][0-?]*[ -/]*[@-~]"  # CSI with < = > parameters (DA2, XTMODKEYS, ...)
    rb"|\x1b\[[0-?]*[ -/]+[@-~]"  # CSI with intermediate bytes (DECSCUSR, DECSTR, DECRQM)
    rb"|\x1b\[[0-9;?]*:[0-9:;]*[@-~]",  # CSI with colon sub-parameters
    re.S,
)
MAX_HELD = 4096


# DEC special graphics, what dialog, tig or mc draw their boxes with: pyte's cs.VT100_MAP (the
# Linux console's) but for the three characters tmux 3.3 shows otherwise on a UTF-8 terminal: `0`
# is a vertical block (pyte: a full block), `h` the newline symbol (pyte: a light shade, xterm
# agrees with tmux) and `_` stays as it is (pyte: a no-break space). Only the map is ours: pyte's
# shift_in/shift_out and draw's translate do the rest.
def _dec_graphics() -> str:
    table = list(cs.VT100_MAP)
    table[ord("0")] = "\u25ae"
    table[ord("_")] = "_"
    table[ord("h")] = "\u2424"
    return "".join(table)


ASCII = cs.LAT1_MAP
DEC_GRAPHICS = _dec_graphics()
# The sets tmux knows; it ignores other designations (UK, IBM PC, ...), so these do too.
CHARSETS = {"B": ASCII, "0": DEC_GRAPHICS}


class Sanitizer:
    """Removes what pyte misreads; holds back an escape sequence cut at a chunk's end."""

    def __init__(self) -> None:
        self._held = b""

    def reset(self) -> None:
        self._held = b""

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def clean(self, data: bytes) -> bytes:
        if self._held:
            data, self._held = self._held + data, b""
        cut = data.rfind(b"\x1b", max(0, len(data) - MAX_HELD))
        if cut != -1 and not _COMPLETE.match(data, cut):
            data, self._held = data[:cut], data[cut:]
        if b"\x1b" in data:
            data = _DROP.sub(b"", data)
        return data


def _new_buffer(screen: pyte.Screen) -> defaultdict[int, StaticDefaultDict[int, Char]]:
    return defaultdict(lambda: StaticDefaultDict(screen.default_char))


def row_text(row: dict[int, Char] | None, columns: int) -> str:
    """A buffer row as text (wide characters once, their stub cell skipped)."""
    if not row:
        return " " * columns
    chars = [" "] * columns
    for x, char in row.items():
        if x < columns:
            chars[x] = char.data
    return "".join(chars)


class TermScreen(pyte.Screen):
    """pyte's Screen with the fixes listed in the module docstring."""

    def __init__(self, columns: int, lines: int, scrollback_lines: int) -> None:
        self.scrollback: deque[str] = deque(maxlen=scrollback_lines)
        self.alternate = False
        self._primary: Any = None  # the primary buffer while the alternate one is shown
        self._alt_cursor: Any = None  # cursor saved by mode 1049
        self._last_char = ""
        super().__init__(columns, lines)

    # -- state -----------------------------------------------------------------------------

    def reset(self) -> None:
        self.alternate = False
        self._primary = None
        self._alt_cursor = None
        super().reset()
        self.g1_charset = ASCII  # as tmux and xterm (pyte starts G1 as the Linux console does)

    def define_charset(self, code: str, mode: str) -> None:
        """ESC ( or ESC ) with ``0`` (DEC special graphics) or ``B`` (ASCII) sets G0 or G1."""
        table = CHARSETS.get(code)
        if table is not None:
            if mode == "(":
                self.g0_charset = table
            elif mode == ")":
                self.g1_charset = table

    def _full_margins(self) -> bool:
        return self.margins is None or (
            self.margins.top == 0 and self.margins.bottom == self.lines - 1
        )

    # -- scrolling and scrollback -------------------------------------------------------

    def index(self) -> None:
        at_bottom = self.cursor.y == (self.margins.bottom if self.margins else self.lines - 1)
        if at_bottom and not self.alternate and self._full_margins() and self.scrollback.maxlen:
            self.scrollback.append(row_text(self.buffer.get(0), self.columns).rstrip(" "))
        super().index()

    def scroll_up(self, count: int | None = None, *_: Any, **__: Any) -> None:
        """SU: scroll the region up ``count`` lines (lines leaving the top go to scrollback)."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        saved = self.cursor.y
        self.cursor.y = bottom
        for _step in range(min(count or 1, self.lines)):
            self.index()
        self.cursor.y = saved
        del top

    def scroll_down(self, count: int | None = None, *more: Any, **__: Any) -> None:
        """SD: scroll the region down ``count`` lines (5 parameters is mouse tracking: ignored)."""
        if more:
            return
        top, _bottom = self.margins or Margins(0, self.lines - 1)
        saved = self.cursor.y
        self.cursor.y = top
        for _step in range(min(count or 1, self.lines)):
            self.reverse_index()
        self.cursor.y = saved

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        if how == 3:  # xterm: erase the saved lines only
            self.scrollback.clear()
            return
        super().erase_in_display(how, *args, **kwargs)

    # -- drawing -------------------------------------------------------------------------

    def draw(self, data: str) -> None:
        """pyte's draw with tmux's handling of what is not one plain cell wide:

        - a zero-width character (combining accent, variation selector, ZWJ) joins the cell
          before it as written: pyte NFC-normalised it, put it on a wide character's stub,
          and stopped drawing the rest of the text at the first one that is not combining;
        - a wide character that does not fit before the right margin wraps to the next line
          whole, or is dropped with autowrap off (pyte drew half of it in the last column);
        - a character of no defined width (wcwidth -1) is skipped.
        """
        if not data:
            return
        self._last_char = data[-1]
        table = self.g1_charset if self.charset else self.g0_charset
        if table is not ASCII:
            data = data.translate(table)
        cursor, columns = self.cursor, self.columns
        wrap, insert = mo.DECAWM in self.mode, mo.IRM in self.mode
        for char in data:
            width = wcwidth(char)
            if width <= 0:
                if width == 0:
                    self._join_previous(char)
                continue
            if cursor.x + width > columns:
                if wrap:
                    self.dirty.add(cursor.y)
                    self.carriage_return()
                    self.linefeed()
                elif width == 1:
                    cursor.x = columns - 1  # overwrite the last column
                else:
                    continue  # tmux drops a wide character that does not fit
            if insert:
                self.insert_characters(width)
            line = self.buffer[cursor.y]
            line[cursor.x] = cursor.attrs._replace(data=char)
            if width == 2 and cursor.x + 1 < columns:
                line[cursor.x + 1] = cursor.attrs._replace(data="")  # the wide character's stub
            cursor.x = min(cursor.x + width, columns)
        self.dirty.add(cursor.y)

    def _join_previous(self, char: str) -> None:
        """Append a zero-width character to the cell drawn before the cursor."""
        x, y = self.cursor.x, self.cursor.y
        if x == 0:
            if y == 0:
                return
            x, y = self.columns, y - 1
        line = self.buffer[y]
        x -= 1
        if x > 0 and line[x].data == "" and wcwidth(line[x - 1].data[:1]) == 2:
            x -= 1  # the stub of a wide character: join the character itself
        line[x] = line[x]._replace(data=line[x].data + char)

    def repeat_last(self, count: int | None = None, *_: Any, **__: Any) -> None:
        """REP: draw the last drawn character ``count`` more times."""
        if self._last_char:
            self.draw(self._last_char * min(count or 1, self.lines * self.columns))

    def select_graphic_rendition(self, *attrs: int, private: bool = False, **_: Any) -> None:
        if private:  # ESC[?4m (XTQMODKEYS) and friends: a query, not a style
            return
        super().select_graphic_rendition(*attrs)

    def set_margins(
        self,
        top: int | None = None,
        bottom: int | None = None,
        *_: Any,
        private: bool = False,
        **__: Any,
    ) -> None:
        if private:  # ESC[?...r restores DEC private modes (XTRESTORE): not supported
            return
        super().set_margins(top, bottom)

    def report_device_status(self, mode: int = 0, *_: Any, **__: Any) -> None:
        """Replies are sent by the session as soon as the query is read (see Terminal)."""

    def report_device_attributes(self, mode: int = 0, **_: Any) -> None:
        """Replies are sent by the session as soon as the query is read (see Terminal)."""

    # -- cursor save/restore: one slot, as xterm -----------------------------------------

    def save_cursor(self) -> None:
        super().save_cursor()
        self.savepoints[:] = self.savepoints[-1:]

    def restore_cursor(self) -> None:
        if not self.savepoints:
            super().restore_cursor()
            return
        kept = self.savepoints[-1]
        super().restore_cursor()
        self.savepoints[:] = [kept._replace(cursor=copy.copy(self.cursor))]

    # -- modes: alternate screen, DECCOLM ------------------------------------------------

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            shifted = {m << 5 for m in modes}
            if shifted & ALT_MODES:
                self._enter_alternate(ALT_WITH_CURSOR in shifted)
            if SAVE_CURSOR_MODE in shifted:
                self._alt_cursor = copy.copy(self.cursor)
            if DECCOLM in shifted:
                self._clear_home()
            modes = tuple(m for m in modes if (m << 5) != DECCOLM)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            shifted = {m << 5 for m in modes}
            if shifted & ALT_MODES:
                self._leave_alternate(ALT_WITH_CURSOR in shifted)
            if SAVE_CURSOR_MODE in shifted and self._alt_cursor is not None:
                self._restore(self._alt_cursor)
            if DECCOLM in shifted:
                self._clear_home()
            modes = tuple(m for m in modes if (m << 5) != DECCOLM)
        super().reset_mode(*modes, **kwargs)

    def _clear_home(self) -> None:
        self.erase_in_display(2)
        self.cursor_position()

    def _enter_alternate(self, save_cursor: bool) -> None:
        if self.alternate:
            return
        if save_cursor:
            self._alt_cursor = copy.copy(self.cursor)
        self._primary = self.buffer
        self.buffer = _new_buffer(self)
        self.alternate = True
        self.dirty.update(range(self.lines))

    def _leave_alternate(self, restore_cursor: bool) -> None:
        # The cursor saved by 1049 comes back even when the alternate screen is not on, as in
        # tmux and xterm: dialog leaves the alternate screen at its start, draws on the primary
        # one and resets 1049 again at its end, which puts the cursor back under its command.
        if self.alternate:
            self.buffer = self._primary
            self._primary = None
            self.alternate = False
            self.dirty.update(range(self.lines))
        if restore_cursor and self._alt_cursor is not None:
            self._restore(self._alt_cursor)

    def _restore(self, cursor: Any) -> None:
        self.cursor = copy.copy(cursor)
        self.ensure_hbounds()
        self.ensure_vbounds()

    # -- resize --------------------------------------------------------------------------

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        lines = lines or self.lines
        columns = columns or self.columns
        if lines == self.lines and columns == self.columns:
            return
        if lines < self.lines:
            self._shrink(self.lines - lines)
            if self._primary is not None:
                for y in [y for y in self._primary if y >= lines]:
                    del self._primary[y]
        if columns < self.columns:
            for buffer in (self.buffer, self._primary or {}):
                for row in buffer.values():
                    for x in [x for x in row if x >= columns]:
                        del row[x]
        old_columns = self.columns
        self.lines, self.columns = lines, columns
        if columns > old_columns:
            self.tabstops |= set(range((old_columns // 8 + 1) * 8, columns, 8))
        self.tabstops = {x for x in self.tabstops if x < columns}
        self.margins = None
        self.ensure_hbounds()
        self.ensure_vbounds()
        self.dirty.update(range(lines))

    def _shrink(self, excess: int) -> None:
        """Drop empty rows below the cursor first, then rows from the top."""
        bottom = 0
        for y in range(self.lines - 1, self.cursor.y, -1):
            if bottom == excess or row_text(self.buffer.get(y), self.columns).strip(" "):
                break
            bottom += 1
        for y in range(self.lines - bottom, self.lines):
            self.buffer.pop(y, None)
        top = excess - bottom
        if not top:
            return
        for y in range(top):
            if not self.alternate and self.scrollback.maxlen:
                self.scrollback.append(row_text(self.buffer.get(y), self.columns).rstrip(" "))
        moved = _new_buffer(self)
        for y, row in self.buffer.items():
            if top <= y < self.lines:
                moved[y - top] = row
        self.buffer = moved
        self.cursor.y = max(0, self.cursor.y - top)


class SafeStream(pyte.ByteStream):
    """pyte's ByteStream with REP, SU and SD, and a ``feed`` that never throws."""

    csi = {  # noqa: RUF012 - pyte's own class attribute, extended
        **pyte.ByteStream.csi,
        "b": "repeat_last",
        "S": "scroll_up",
        "T": "scroll_down",
    }
    events = pyte.ByteStream.events | {"repeat_last", "scroll_up", "scroll_down"}

    def __init__(self, screen: TermScreen) -> None:
        super().__init__(screen)
        self.errors = 0
        # pyte's parser drops ESC ( / ESC ) designations and SI/SO while ``use_utf8`` is on (after
        # mgk25's advice that ISO 2022 shifts have no place in UTF-8). tmux and xterm honour them
        # in UTF-8, and ncurses relies on that for its boxes. So the parser runs with the flag off
        # and ``feed`` decodes UTF-8 whatever it says; ESC % (which would set it) is ignored.
        self.use_utf8 = False

    def select_other_charset(self, code: str) -> None:
        """ESC % G / ESC % @: ignored, as tmux does (its input is always UTF-8)."""

    def reset_decoder(self) -> None:
        self.utf8_decoder.reset()

    @property
    def in_ground_state(self) -> bool:
        """True when no escape sequence is half parsed."""
        return bool(self._taking_plain_text)

    def feed(self, data: bytes) -> None:  # type: ignore[override]  # bytes, as ByteStream
        self._feed_text(self.utf8_decoder.decode(data))

    def _feed_text(self, data: str) -> None:
        # pyte's Stream.feed, with each dispatch guarded: a failing handler is
        # counted and skipped, and parsing goes on at the next character.
        assert self.listener is not None
        draw = self.listener.draw
        match_text = self._text_pattern.match
        taking_plain_text = self._taking_plain_text
        length = len(data)
        offset = 0
        while offset < length:
            if taking_plain_text:
                match = match_text(data, offset)
                if match:
                    start, offset = match.span()
                    try:
                        draw(data[start:offset])
                    except Exception:
                        self.errors += 1
                else:
                    taking_plain_text = False
            else:
                char = data[offset]
                offset += 1
                try:
                    taking_plain_text = self._send_to_parser(char)
                except Exception:  # the parser was reset to its ground state
                    self.errors += 1
                    taking_plain_text = self._taking_plain_text
        self._taking_plain_text = taking_plain_text


# -- rendering ---------------------------------------------------------------------------

_NAMED = {"default": ""}


def colour(value: str) -> str:
    """pyte's colour as the API names it: '' (default), 'red', 'bright_red' or '#rrggbb'."""
    if value in _NAMED:
        return _NAMED[value]
    if value.startswith("bright"):
        return "bright_" + value[6:]
    if len(value) == 6 and all(c in "0123456789abcdefABCDEF" for c in value):
        return "#" + value.lower()
    return value


def lines_of(screen: TermScreen, keep_trailing_spaces: bool) -> list[str]:
    out = []
    for y in range(screen.lines):
        text = row_text(screen.buffer.get(y), screen.columns)
        out.append(text if keep_trailing_spaces else text.rstrip(" "))
    return out


def styled_lines(screen: TermScreen, lines: list[str]) -> list[list[Run]]:
    """Each line as runs of equal attributes; the runs' texts add up to the line."""
    result = []
    default = screen.default_char
    for y, line in enumerate(lines):
        row: Mapping[int, Char] = screen.buffer.get(y) or {}
        runs: list[Run] = []
        key: tuple[Any, ...] | None = None
        text: list[str] = []
        left = len(line)
        for x in range(screen.columns):
            if left <= 0:
                break
            char = row.get(x, default)
            if not char.data:
                continue  # the stub cell after a wide character
            attrs = (
                char.fg,
                char.bg,
                char.bold,
                char.italics,
                char.underscore,
                char.reverse,
                char.strikethrough,
                char.blink,
            )
            if attrs != key and text:
                runs.append(_run("".join(text), key))
                text = []
            key = attrs
            piece = char.data[:left]
            text.append(piece)
            left -= len(piece)
        if text:
            runs.append(_run("".join(text), key))
        result.append(runs)
    return result


def _run(text: str, key: tuple[Any, ...] | None) -> Run:
    fg, bg, bold, italic, underline, reverse, strike, blink = key or ("default",) * 2 + (False,) * 6
    return Run(text, colour(fg), colour(bg), bold, italic, underline, reverse, strike, blink)


def cursor_of(screen: TermScreen) -> Cursor:
    return Cursor(
        screen.cursor.y, min(screen.cursor.x, screen.columns - 1), not screen.cursor.hidden
    )


def autowrap(screen: TermScreen) -> bool:
    return mo.DECAWM in screen.mode


def plain_charset(screen: TermScreen) -> bool:
    """True when text is drawn as written (the character set in use is ASCII)."""
    return (screen.g1_charset if screen.charset else screen.g0_charset) is ASCII
