"""Draw an attach snapshot on the local terminal as the program left it: text, colours, cursor.

The snapshot's ``styled_lines`` carry every cell's attributes, so a repaint after attaching (or
after lagging) shows a coloured prompt, vim's syntax colours or htop's bars at once, instead of
plain text until the program next redraws. Output that follows is the program's own bytes.
"""

from __future__ import annotations

import re
from typing import Any

# The host names the 16 basic colours as pyte does ("brown" is SGR 33, often shown yellow).
BASIC_COLOURS = ("black", "red", "green", "brown", "blue", "magenta", "cyan", "white")
RESET = "\x1b[0m"
SHOW_CURSOR = "\x1b[?25h"
HIDE_CURSOR = "\x1b[?25l"
ENTER_ALTERNATE = b"\x1b[?1049h"
LEAVE_ALTERNATE = b"\x1b[?1049l"
# The private modes that switch screens (1049 as vim and less use it, and the older 1047 and 47).
_SCREEN_SWITCH = re.compile(rb"\x1b\[\?(?:1049|1047|47)([hl])")
_LONGEST_SWITCH = len(ENTER_ALTERNATE)


def colour_codes(name: str, background: bool) -> list[str]:
    """SGR parameters for one of the API's colour names ('' is the default: no parameter)."""
    if not name:
        return []
    if name.startswith("#") and len(name) == 7:
        try:
            red, green, blue = (int(name[i : i + 2], 16) for i in (1, 3, 5))
        except ValueError:
            return []
        return ["48" if background else "38", "2", str(red), str(green), str(blue)]
    bright = name.startswith("bright_")
    base = name.removeprefix("bright_")
    if base not in BASIC_COLOURS:
        return []  # a name this client does not know: drawn in the default colour
    first = (100 if bright else 40) if background else (90 if bright else 30)
    return [str(first + BASIC_COLOURS.index(base))]


def sgr(run: Any) -> str:
    """The escape that sets a StyledRun's attributes, from a clean (reset) state."""
    codes = ["0"]
    for flag, code in (
        (run.bold, "1"),
        (run.italic, "3"),
        (run.underline, "4"),
        (run.blink, "5"),
        (run.reverse, "7"),
        (run.strikethrough, "9"),
    ):
        if flag:
            codes.append(code)
    codes += colour_codes(run.fg, background=False)
    codes += colour_codes(run.bg, background=True)
    return "\x1b[" + ";".join(codes) + "m"


def repaint(screen: Any) -> bytes:
    """Clear the local terminal and draw ``screen`` (an ether.v1.Screen in STRUCTURED form):
    each row at its place with its styles, then the cursor where and as the program left it.
    A screen without styled lines is drawn as plain text."""
    out = [RESET, "\x1b[H\x1b[2J"]
    styled = list(screen.styled_lines)
    for row, line in enumerate(screen.lines):
        out.append(f"\x1b[{row + 1};1H")
        if row < len(styled) and styled[row].runs:
            previous = RESET
            for run in styled[row].runs:
                code = sgr(run)
                if code != previous:
                    out.append(code)
                    previous = code
                out.append(run.text)
            out.append(RESET)
        else:
            out.append(line)
    out.append(f"\x1b[{screen.cursor.row + 1};{screen.cursor.col + 1}H")
    out.append(SHOW_CURSOR if screen.cursor.visible else HIDE_CURSOR)
    return "".join(out).encode()


class LocalScreen:
    """Which screen the local terminal shows, main or alternate, as the program's output and the
    repaints switch it: output is passed through as the program wrote it, so a full-screen
    program (vim, less, htop) switches the local terminal too, and a detach in the middle of one
    must switch it back or leave the user's shell on the alternate screen."""

    def __init__(self) -> None:
        self.alternate = False
        self._tail = b""  # the end of the last chunk: a switch may be split between two

    def repaint(self, screen: Any) -> bytes:
        """``repaint(screen)`` on the screen the program is on."""
        switch = b""
        if screen.alternate_screen != self.alternate:
            switch = ENTER_ALTERNATE if screen.alternate_screen else LEAVE_ALTERNATE
            self.alternate = screen.alternate_screen
        self._tail = b""
        return switch + repaint(screen)

    def saw(self, data: bytes) -> None:
        """Follow the switches in a chunk of the program's output."""
        window = self._tail + data
        for match in _SCREEN_SWITCH.finditer(window):
            self.alternate = match.group(1) == b"h"
        self._tail = window[-(_LONGEST_SWITCH - 1) :]

    def restore(self) -> bytes:
        """What leaves the local terminal usable after a detach or the program's exit: the main
        screen, default attributes and a visible cursor, whatever the program had set."""
        leave = LEAVE_ALTERNATE if self.alternate else b""
        self.alternate = False
        return leave + (RESET + SHOW_CURSOR).encode()
