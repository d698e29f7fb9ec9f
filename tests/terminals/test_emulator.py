"""The emulator skips through backlogs it cannot show without changing what it shows.

A screen fed a large backlog in one go (the fast-forward rules) must equal the same screen fed
every byte in small pieces: lines, cursor, styles and scrollback. These run in-process on the
emulator, the one place where both ways can be compared byte for byte.
"""

from __future__ import annotations

import random

import pytest

from ether_host.terminals.emulator import Emulator, ResizeMark
from ether_host.terminals.model import ScreenRequest

FULL = ScreenRequest(scrollback=True, styles=True)


def fed_in_pieces(data: bytes, rows: int, cols: int, history: int) -> Emulator:
    emulator = Emulator(rows, cols, history)
    for start in range(0, len(data), 4096):
        emulator.advance(data[start : start + 4096], start, [])
    return emulator


def corpus(kind: str) -> bytes:
    if kind == "plain":
        return b"".join(b"line %d of plain output\r\n" % n for n in range(3000))
    if kind == "coloured":
        return b"".join(
            b"\x1b[0m\x1b[01;34mdir%d\x1b[0m  \x1b[01;32mexe%d\x1b[0m\x1b[K\r\n" % (n, n)
            for n in range(2500)
        )
    if kind == "wrapping":
        return b"".join(b"%d " % n + b"w" * (n % 230) + b"\r\n" for n in range(1600))
    if kind == "unicode":
        return "".join(f"{n} caf\u00e9 \u6f22\u5b57 \u2500\u2500\r\n" for n in range(5000)).encode()
    if kind == "wide-wrapping":  # wide characters at the margin, zero-width ones after them
        return "".join(
            f"{n} " + "x" * (n % 7) + "\u6f22\u0301" * (n % 50) + "\u2764\ufe0f\r\n"
            for n in range(5000)
        ).encode()
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["plain", "coloured", "wrapping", "unicode", "wide-wrapping"])
@pytest.mark.parametrize(("rows", "cols", "history"), [(24, 80, 1000), (50, 200, 100), (10, 40, 0)])
def test_skipping_a_backlog_gives_the_same_screen(
    kind: str, rows: int, cols: int, history: int
) -> None:
    """One big backlog (skipped through) renders exactly as the same bytes fed piece by piece."""
    data = corpus(kind)
    skipped = Emulator(rows, cols, history)
    skipped.advance(data, 0, [])
    reference = fed_in_pieces(data, rows, cols, history)
    assert skipped.render(FULL, None) == reference.render(FULL, None)
    assert skipped.stats.skipped > len(data) // 2  # most of it was never parsed


SCREEN_FIRST = (  # a full-screen program's leftovers: a long status row at the bottom, cursor home
    b"\x1b[2J\x1b[24;1H"
    + b"S" * 75
    + b"\x1b[50;1H"
    + b"T" * 190
    + b"\x1b[10;1H"
    + b"U" * 30
    + b"\x1b[H"
)


@pytest.mark.parametrize("kind", ["plain", "coloured", "wrapping", "unicode"])
@pytest.mark.parametrize(("rows", "cols", "history"), [(24, 80, 1000), (50, 200, 100)])
@pytest.mark.parametrize("prefix", [b"", SCREEN_FIRST])
def test_reading_every_few_kib_of_line_output_gives_the_same_screen(
    kind: str, rows: int, cols: int, history: int, prefix: bytes
) -> None:
    """Backlogs of 8-20 KiB (a screen read every few ms while a program prints fast: the scroll
    rule) render exactly as the same bytes fed in 4 KiB pieces, which no rule touches, whatever
    the screen held before; of ASCII lines a large part is never parsed."""
    data = prefix + corpus(kind)[:300_000]
    skipped = Emulator(rows, cols, history)
    sizes = random.Random(7)
    start = 0
    while start < len(data):
        size = sizes.randrange(8 * 1024, 20 * 1024)
        skipped.advance(data[start : start + size], start, [])
        start += size
    reference = fed_in_pieces(data, rows, cols, history)
    assert skipped.render(FULL, None) == reference.render(FULL, None)
    if kind in ("plain", "coloured", "wrapping"):  # ASCII: rows made as text, not parsed
        assert skipped.stats.skipped > len(data) // 4


def test_full_screen_output_is_never_skipped() -> None:
    """Cursor addressing makes every byte count: such a backlog is fed whole and renders exactly."""
    frames = b"".join(
        b"\x1b[H\x1b[2J" + b"".join(b"\x1b[%d;1Hrow %d frame %d" % (r + 1, r, f) for r in range(24))
        for f in range(400)
    )
    skipped = Emulator(24, 80, 100)
    skipped.advance(frames, 0, [])
    assert skipped.stats.skipped == 0
    assert skipped.render(FULL, None) == fed_in_pieces(frames, 24, 80, 100).render(FULL, None)


def test_resizes_apply_at_their_offsets() -> None:
    """Output written before a resize is laid out at the old width, output after it at the new one."""
    first = b"a" * 100 + b"\r\n"
    second = b"b" * 100 + b"\r\n"
    emulator = Emulator(10, 80, 0)
    emulator.advance(first + second, 0, [ResizeMark(len(first), 10, 120)])
    lines = emulator.render(ScreenRequest(), None).lines
    assert lines[:3] == ["a" * 80, "a" * 20, "b" * 100]


def test_vim_start_up_sequences_do_not_break_the_screen() -> None:
    """pyte 0.8.2 raises on ESC[?4m and draws DCS payloads as text; the wrapped screen does neither."""
    emulator = Emulator(5, 40, 0)
    emulator.advance(
        b"\x1b[?4m\x1bP+q436f\x1b\\\x1b[>4;2m\x1b[2 q\x1b[?1049hvim\x1b[?1049lshell", 0, []
    )
    view = emulator.render(ScreenRequest(), None)
    assert view.lines[0] == "shell" and not view.alternate and emulator.stream.errors == 0


def test_a_wide_character_that_does_not_fit_wraps_whole_or_is_dropped() -> None:
    """As tmux does: with autowrap on, a wide character that does not fit before the margin
    starts the next line; with autowrap off (ESC[?7l) it is dropped, and one that fits is
    drawn. A zero-width character before anything was drawn is dropped too."""
    emulator = Emulator(4, 10, 0)
    emulator.advance(
        "\u200b\x1b[?7labcdefghi\u6f22!\r\nabcdefgh\u6f22\x1b[?7h\r\nabcdefghi\u6f22".encode(),
        0,
        [],
    )
    view = emulator.render(ScreenRequest(), None)
    assert view.lines == ["abcdefghi!", "abcdefgh\u6f22", "abcdefghi", "\u6f22"]
    assert emulator.stream.errors == 0


SOUP = [
    *(b"\x1b[", b"\x1b]0;title\x07", b"\x1b[?1049h", b"\x1b[?1049l", b"\x1b[?47h", b"\x1bc"),
    *(b"\r\n", b"\n", b"\t", b"\x08", b"\x0e", b"\x0f", b"\x1b(0qqq\x1b(B", b"\xff\xfe"),
    *(b"\x1b[?7l", b"\x1b[?7h", b"\x1b[4h", b"\x1b[4l", b"\x1b[5;78H", b"\x1b[200;1H", b"\x1b[K"),
    *(b"\x1b[2J", b"\x1b[3J", b"\x1b[3b", b"\x1b7", b"\x1b8", b"\x1b[3;5r", b"\x1b[1;200r"),
    *(b"\x1bM", b"\x1bD", b"\x1b[99S", b"\x1b[99T", b"\x1b[1;31m", b"abc", b"x" * 79),
    *(c.encode() for c in ("\u4e2d", "\u0301", "\u200b", "\ufe0f", "\U0001f600", "\u2764")),
]


def test_any_byte_soup_renders_a_whole_screen() -> None:
    """Random mixes of escapes, wide and zero-width characters, margins, modes and stray bytes,
    fed in random pieces at random sizes, never raise: the screen always has its rows, and the
    cursor stays on it. (Malformed sequences are counted and skipped, as a terminal skips them.)"""
    rng = random.Random(5)
    for _ in range(400):
        rows, cols = rng.randint(1, 30), rng.randint(1, 100)
        emulator = Emulator(rows, cols, rng.choice([0, 10, 100]))
        data = b"".join(
            rng.choice(SOUP) if rng.random() < 0.7 else bytes([rng.randrange(256)])
            for _ in range(rng.randint(1, 300))
        )
        cuts = sorted(rng.sample(range(len(data) + 1), min(3, len(data) + 1)))
        for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
            emulator.advance(data[start:end], start, [])
        view = emulator.render(FULL, None)
        assert len(view.lines) == rows, data
        assert 0 <= view.cursor.row < rows and 0 <= view.cursor.col <= cols, data


def test_dec_special_graphics_draws_boxes_as_tmux_shows_them() -> None:
    """ESC ( 0 makes G0 the DEC special graphics set and ESC ( B makes it ASCII again; ESC ) 0
    with SO/SI does the same through G1, which starts as ASCII (a stray SO draws letters). This
    works in UTF-8, where pyte alone ignores both; ESC % @ does not turn UTF-8 off."""
    emulator = Emulator(6, 30, 0)
    emulator.advance(
        b"\x1b(0lqqk\x1b(B lqk\r\n"
        b"\x0ex1x\x0f\x1b)0 \x0ex1x\x0f x\r\n"
        b"\x1b(0mqvqj\x1b(B\r\n"
        b"\x1b%@\xe2\x94\x80 \x1b(0`afg~\x1b(B" + "\u00e9".encode(),
        0,
        [],
    )
    view = emulator.render(FULL, None)
    assert view.lines[:4] == [
        "\u250c\u2500\u2500\u2510 lqk",
        "x1x \u25021\u2502 x",
        "\u2514\u2500\u2534\u2500\u2518",
        "\u2500 \u25c6\u2592\u00b0\u00b1\u00b7\u00e9",
    ]
    assert view.styled is not None and view.styled[0][0].text == "\u250c\u2500\u2500\u2510 lqk"
    assert emulator.stream.errors == 0


def test_skipping_lines_drawn_in_dec_special_graphics_gives_the_same_screen() -> None:
    """Lines written while DEC special graphics is selected are graphics in the scrollback too:
    the rows the line rule makes without pyte are made only while text is drawn as written."""
    data = b"\x1b(0" + b"".join(b"lqk %d\r\n" % n for n in range(6000))
    skipped = Emulator(24, 80, 1000)
    skipped.advance(data[:3], 0, [])  # the lines come as a backlog after the switch
    skipped.advance(data[3:], 3, [])
    reference = fed_in_pieces(data, 24, 80, 1000)
    assert skipped.stats.skipped > len(data) // 2
    assert skipped.render(FULL, None) == reference.render(FULL, None)
    assert skipped.render(FULL, None).scrollback[0].startswith("\u250c\u2500\u2510 ")


def test_a_rebuilt_screen_keeps_the_character_sets_set_before_its_clear() -> None:
    """After lost output, the screen rebuilt from the last clear replays the G0/G1 designations
    and the shift made before it: boxes drawn after the clear are still boxes."""
    before = b"\x1b)0" + b"\x1b[5;1Hx" * 50_000 + b"\x0e"
    frame = b"\x1b[2J\x1b[Hlqqk\r\nx  x\r\nmqqj"
    emulator = Emulator(10, 40, 0)
    emulator.advance(before + frame, 1000, [])  # starts past the output held: a gap
    lines = emulator.render(FULL, None).lines
    assert emulator.stats.skipped > 0
    assert lines[:3] == ["\u250c\u2500\u2500\u2510", "\u2502  \u2502", "\u2514\u2500\u2500\u2518"]


def test_leaving_the_alternate_screen_twice_restores_the_cursor_twice() -> None:
    """As tmux and xterm: resetting 1049 puts back the cursor saved when 1049 was set even when
    the alternate screen is no longer on (dialog does so at its start and at its end)."""
    emulator = Emulator(10, 40, 0)
    emulator.advance(
        b"$ cmd\r\n\x1b[?1049h\x1b[?1049l\x1b[5;5Hbox\x1b[10;1H\x1b[?1049lafter", 0, []
    )
    lines = emulator.render(FULL, None).lines
    assert lines[1] == "after" and lines[4] == "    box"
