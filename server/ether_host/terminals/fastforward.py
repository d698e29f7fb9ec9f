"""Skipping through backlogs the screen cannot show.

pyte digests ~0.5 MB/s; a PTY delivers ~46 MB/s. When the emulator is behind
by a large backlog, most of it can be skipped with an exact result:

**Line rule (exact).** When the backlog holds only line output -- no escape
sequences except SGR (``ESC[...m``) and EL (``ESC[K``), no control
characters but BEL, BS, TAB, CR and LF -- the screen has no scroll region,
and the backlog holds more than ``rows + scrollback`` CR-LF lines, then only
its last ``rows + scrollback`` lines can be seen on the screen or in the
scrollback. The rest is skipped; the SGR state it leaves behind is replayed.
Lines bound for the scrollback only are wrapped into rows as text without
pyte when they are plain ASCII; the last ``rows`` lines go through pyte.

**Scroll rule (exact).** A smaller backlog of line output (from 8 KiB: ReadScreen every few
ms on a terminal printing fast), starting at column 0 of a blank bottom row with the screen in
use above it: feeding it would only scroll the screen's rows and all but its last ``rows`` lines
into the scrollback, each as its text. They are put there as text without pyte (when they are
plain ASCII); the last ``rows`` lines go through pyte on a cleared screen, as the line rule does.

**Clear rule (approximate, only for huge backlogs).** When the emulator lost
output (the buffer dropped it before anyone read the screen) and the retained
output is not line output, the screen is rebuilt from the last full-screen
clear (``ESC[2J`` or entering the alternate screen) in it, after replaying the
mode, margin, title, character set and style changes before that point.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LINE_RULE_MIN = 32 * 1024
SCROLL_RULE_MIN = 8 * 1024

# Bytes that never disqualify a backlog: printable ASCII, BEL BS TAB LF CR, and UTF-8 bytes but
# \xc2 (which starts the C1 controls). ESC is checked on its own: only SGR and EL may follow it.
_HARMLESS = bytes(
    b for b in range(256) if (b >= 0x20 or b in (7, 8, 9, 10, 13)) and b not in (0x1B, 0xC2)
)
_BAD_ESC = re.compile(rb"\x1b(?!\[[0-9;]*[mK])")
_C1 = re.compile(rb"\xc2[\x80-\x9f]")
_SGR = re.compile(rb"\x1b\[[0-9;]*m")
_SGR_RESET = re.compile(rb"\x1b\[(?:0?|0;[0-9;]*|;[0-9;]*)m")
_STRIP_LINE = re.compile(rb"\x1b\[[0-9;]*[mK]|\x07")
_SIMPLE_LINE = re.compile(rb"[ -~]*")
_CLEAR = re.compile(rb"\x1b\[2J|\x1b\[\?(?:1049|1047|47)h")
_PRIVATE_MODE = re.compile(rb"\x1b\[\?([0-9]+)([hl])")
_KEEP_LAST = re.compile(
    rb"\x1b\[[0-9;]*r|\x1b\][02];[^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-9;]*[Hf]"
    rb"|\x1b[()][0-~]|[\x0e\x0f]"  # G0 and G1 designations, the shift between them
)


@dataclass(frozen=True)
class Plan:
    """What to feed instead of a backlog."""

    prelude: bytes  # replayed state changes (SGR, modes, ...)
    history_rows: list[str] | None  # rows to append to the scrollback as text, in order
    feed: bytes  # the bytes pyte must see
    skipped: int  # bytes not fed at all
    clear_screen: bool  # start from a blank screen with the cursor at home


def _sgr_state(data: bytes) -> bytes:
    """The SGR sequences of ``data`` from its last reset on: replaying them gives the same style."""
    window = 64 * 1024
    while True:
        begin = max(0, len(data) - window)
        resets = [m.start() for m in _SGR_RESET.finditer(data, begin)]
        if resets or begin == 0:
            break
        window *= 4
    start = resets[-1] if resets else 0
    kept = [m.group(0) for m in _SGR.finditer(data, start)]
    return b"".join(kept[-256:])


def line_output(data: bytes) -> bool:
    """True when ``data`` holds no control but BEL/BS/TAB/LF/CR and no escape but SGR and EL."""
    rest = data.translate(None, _HARMLESS)  # at C speed; leaves only the bytes worth a look
    if rest.translate(None, b"\x1b\xc2"):  # another control character
        return False
    if b"\x1b" in rest and _BAD_ESC.search(data):
        return False
    return not (b"\xc2" in rest and _C1.search(data))


def line_rule(backlog: bytes, rows: int, cols: int, history: int, as_text: bool) -> Plan | None:
    """The exact skip for line output, or None when the backlog does not qualify.

    ``as_text``: rows bound for the scrollback may be made as text without pyte (autowrap is on
    and characters are drawn as written). Line output holds no SI, SO or ``ESC (``, so the
    character set in use stays the same through the backlog.
    """
    if len(backlog) < LINE_RULE_MIN or not line_output(backlog):
        return None
    keep = rows + history
    position = len(backlog)
    cuts = []
    for _ in range(keep + 1):
        position = backlog.rfind(b"\n", 0, position)
        if position <= 0:
            return None
        cuts.append(position)
    cut = cuts[-1]
    if backlog[cut - 1 : cut] != b"\r":
        return None
    start = cut + 1
    prelude = _sgr_state(backlog[:start])
    history_rows = None
    feed_from = start
    if history and as_text:
        history_end = cuts[rows] + 1  # start of the last `rows` lines
        section = backlog[start:history_end]
        rows_text = _text_rows(section, cols)
        if rows_text is not None:
            history_rows = rows_text
            prelude += _sgr_state(section)
            feed_from = history_end
    return Plan(prelude, history_rows, backlog[feed_from:], feed_from, True)


def scroll_rule(lines: bytes, rows: int, cols: int) -> Plan | None:
    """The scroll rule's skip for ``lines``, line output (``line_output``) fed from column 0 of
    a blank bottom row; None when it has no more than ``rows`` CR-LF lines or they are not
    plain. The screen's own rows above the cursor go to the scrollback first (the caller's part:
    this sees only the bytes)."""
    position = len(lines)
    for _ in range(rows + 1):
        position = lines.rfind(b"\n", 0, position)
        if position <= 0:
            return None
    if lines[position - 1 : position] != b"\r":
        return None
    history_end = position + 1  # start of the last `rows` lines
    section = lines[:history_end]
    rows_text = _text_rows(section, cols)
    if rows_text is None:
        return None
    return Plan(_sgr_state(section), rows_text, lines[history_end:], history_end, True)


def _text_rows(section: bytes, cols: int) -> list[str] | None:
    """CR-LF lines of plain ASCII as screen rows (wrapped at ``cols``); None if not plain."""
    rows: list[str] = []
    for raw in section.split(b"\r\n")[:-1]:
        line = _STRIP_LINE.sub(b"", raw) if b"\x1b" in raw or b"\x07" in raw else raw
        if not _SIMPLE_LINE.fullmatch(line):
            return None
        text = line.decode("ascii")
        if not text:
            rows.append("")
            continue
        rows.extend(text[i : i + cols].rstrip(" ") for i in range(0, len(text), cols))
    return rows


def _kind(text: bytes) -> bytes:
    """What a state change of _KEEP_LAST sets: only the last one of each kind is replayed."""
    if text.startswith(b"\x1b]"):
        return text[:3]  # the title or the icon name
    if text.startswith((b"\x1b(", b"\x1b)")):
        return text[:2]  # G0 or G1
    if text in (b"\x0e", b"\x0f"):
        return b"shift"
    return text[-1:]  # margins, cursor position


def clear_rule(backlog: bytes) -> Plan | None:
    """Start from the last full-screen clear, replaying state changes before it."""
    last = None
    for last in _CLEAR.finditer(backlog):  # noqa: B007 - we want the last match
        pass
    if last is None or last.start() < LINE_RULE_MIN:
        return None
    before = backlog[: last.start()]
    modes: dict[bytes, bytes] = {}
    for match in _PRIVATE_MODE.finditer(before):
        modes.pop(match.group(1), None)
        modes[match.group(1)] = match.group(0)
    singles: dict[bytes, bytes] = {}
    for match in _KEEP_LAST.finditer(before):
        text = match.group(0)
        kind = _kind(text)
        singles.pop(kind, None)  # keep the order of the last occurrences
        singles[kind] = text
    prelude = b"".join(modes.values()) + b"".join(singles.values()) + _sgr_state(before)
    return Plan(prelude, None, backlog[last.start() :], last.start(), False)
