"""Regular expressions on terminal output: compiling them, and searching output as it comes.

Output is turned into text incrementally: escape sequences and control
characters other than TAB and LF are removed (so ``\\r\\n`` reads as ``\\n``),
and the bytes are decoded as UTF-8 with invalid bytes shown as U+FFFD. Every
character keeps the byte offset it came from, so a match reports the output
offsets it spans. Each search covers the new text plus the last
``OVERLAP`` characters before it: a match may be up to 64 KiB long.

A caller's regex is compiled by RE2, never by ``re``: RE2 matches in time linear
in the text whatever the pattern (no backtracking), so no pattern can hold the
event loop, where every search runs. RE2 has no backreferences or lookaround;
a pattern that needs them is INVALID_ARGUMENT saying so. Patterns are at most
``MAX_REGEX_BYTES`` long. The host's own patterns below stay with ``re``.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

import re2

from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.reasons import Reason

OVERLAP = 64 * 1024
WINDOW = 1024 * 1024
MAX_HELD = 4096
MAX_REGEX_BYTES = 4096  # a caller's regex, in UTF-8 bytes

_STRIP = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_].*?\x1b\\|\x1b[ -/]*[0-~]"
    rb"|[\x00-\x08\x0b-\x1f\x7f]",
    re.S,
)
_INCOMPLETE_ESC = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[PX^_](?:[^\x1b]|\x1b(?!\\))*\x1b?|[ -/]*)\Z", re.S
)
_SURROGATE = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True)
class RegexMatch:
    """Where a regex matched: the text, its groups ('' for one that took no part), the span."""

    text: str
    groups: tuple[str, ...]
    start: int
    end: int


class Regex:
    """A caller's regex compiled by RE2 in multi-line mode (``^``/``$`` at line ends)."""

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        self._compiled = compiled

    def search(self, text: str, pos: int = 0) -> RegexMatch | None:
        """The first match starting at ``pos`` or later, as ``re``'s ``search(text, pos)``:
        ``^`` and ``\\b`` still see the character before ``pos``. Costs O(len(text) - pos)
        (RE2's own ``pos`` would re-encode the whole text)."""
        pos = min(max(pos, 0), len(text))
        base = max(0, pos - 1)
        match = self._compiled.search(text[base:] if base else text, pos - base)
        if match is None:
            return None
        start, end = match.span()
        return RegexMatch(
            match.group(0), tuple(g or "" for g in match.groups()), start + base, end + base
        )


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a bad pattern is the caller's error, reported to the caller
    return options


_RE2_OPTIONS = _re2_options()


def compile_regex(pattern: str, field: str) -> Regex:
    """Compile with RE2 in multi-line mode; a bad pattern is INVALID_ARGUMENT saying why."""
    if not pattern:
        raise InvalidArgument(
            f"{field}: the regex is empty",
            reason=Reason.EMPTY_REGEX,
            violations=[FieldViolation(field, "required")],
        )
    size = len(pattern) if len(pattern) > MAX_REGEX_BYTES else len(pattern.encode(errors="replace"))
    if size > MAX_REGEX_BYTES:
        raise InvalidArgument(
            f"{field}: the regex is longer than {MAX_REGEX_BYTES} bytes",
            reason=Reason.REGEX_TOO_LONG,
            metadata={"limit": str(MAX_REGEX_BYTES)},
            violations=[FieldViolation(field, f"at most {MAX_REGEX_BYTES} bytes")],
        )
    try:
        return Regex(pattern, re2.compile("(?m)" + pattern, _RE2_OPTIONS))
    except (re2.error, UnicodeEncodeError) as error:
        problem = error.args[0] if error.args else "does not compile"
        if isinstance(problem, bytes):
            problem = problem.decode("utf-8", errors="replace")
        rejected = str(problem)
    try:  # a plain syntax error: Python's parser names its position
        re.compile(pattern, re.MULTILINE)
    except re.error as error:
        position = error.pos if error.pos is not None else 0
        raise InvalidArgument(
            f"{field}: regex {_clip(pattern)!r} does not compile: {error.msg} at position {position} "
            "(patterns use RE2 syntax)",
            reason=Reason.INVALID_REGEX,
            metadata={"position": str(position), "syntax": "RE2"},
            violations=[FieldViolation(field, f"{error.msg} at position {position}")],
        ) from None
    except (RecursionError, OverflowError, ValueError):
        pass
    description = (
        f"not RE2 syntax ({rejected}): RE2 matches in linear time and has no "
        "backreferences, lookahead or lookbehind; write \\z, not \\Z, for the end of the text"
    )
    raise InvalidArgument(
        f"{field}: regex {_clip(pattern)!r} is {description}",
        reason=Reason.INVALID_REGEX,
        metadata={"syntax": "RE2"},
        violations=[FieldViolation(field, description)],
    )


def _clip(pattern: str) -> str:
    """The start of a long pattern, for messages (which travel in trailers of at most 8 KiB)."""
    return pattern if len(pattern) <= 200 else pattern[:200] + "..."


def _utf8_cut(data: bytes) -> int:
    """Length of ``data`` without an incomplete UTF-8 sequence at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xC0:
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)


class OutputText:
    """Output bytes -> searchable text; a character's byte offset is worked out on demand.

    Each ``feed`` adds one piece (its byte offset, raw bytes and where its text
    starts); stripping and decoding run once per piece at C speed. Mapping a
    text index back to a byte offset re-walks one piece, which only happens for
    a match.
    """

    def __init__(self, offset: int, raw: bool = False) -> None:
        self.raw = raw
        self.text = ""
        self._starts: list[int] = []  # text index where each piece starts
        self._pieces: list[tuple[int, bytes]] = []  # (byte offset, raw bytes)
        self._held = b""
        self._next = offset  # offset of the next byte to come (held bytes excluded)

    @property
    def next_offset(self) -> int:
        return self._next + len(self._held)

    def feed(self, data: bytes) -> str:
        """Add output; returns the new text."""
        offset = self._next
        data = self._held + data
        keep = _utf8_cut(data)
        if not self.raw:
            incomplete = _INCOMPLETE_ESC.search(data, max(0, len(data) - MAX_HELD))
            if incomplete:
                keep = min(keep, incomplete.start())
        self._held = data[keep:]
        data = data[:keep]
        self._next = offset + keep
        if not data:
            return ""
        new = _show(data if self.raw else _STRIP.sub(b"", data))
        self._starts.append(len(self.text))
        self._pieces.append((offset, data))
        self.text += new
        return new

    def _locate(self, index: int, after: bool) -> int:
        """Byte offset of text[index] (``after``: just after text[index - 1])."""
        target = index - 1 if after else index
        if target < 0 or not self._pieces:
            return self._pieces[0][0] if self._pieces else self._next
        if target >= len(self.text):
            return self._next
        number = bisect.bisect_right(self._starts, target) - 1
        offset, raw = self._pieces[number]
        want = target - self._starts[number]  # characters into this piece
        position = 0
        segments = [] if self.raw else list(_STRIP.finditer(raw))
        for start, end in [*((m.start(), m.end()) for m in segments), (len(raw), len(raw))]:
            segment = raw[position:start].decode("utf-8", errors="surrogateescape")
            if want < len(segment):
                used = segment[: want + 1] if after else segment[:want]
                return offset + position + len(used.encode("utf-8", errors="surrogateescape"))
            want -= len(segment)
            position = end
        return offset + len(raw)

    def offset_of(self, index: int) -> int:
        """Byte offset of text[index] (just after the text when index == len(text))."""
        return self._locate(index, after=False)

    def end_offset_of(self, index: int) -> int:
        """Byte offset just after text[index - 1] (where a match ending at ``index`` ends)."""
        return self._locate(index, after=True)

    def clear(self) -> None:
        """Forget the text (offsets of later output stay right)."""
        self.text = ""
        self._starts.clear()
        self._pieces.clear()

    def trim(self, keep: int) -> int:
        """Forget all but the last ``keep`` characters (whole pieces); returns how many went."""
        drop_to = len(self.text) - keep
        if drop_to <= 0:
            return 0
        piece = bisect.bisect_right(self._starts, drop_to) - 1
        cut = self._starts[piece]
        if cut <= 0:
            return 0
        self.text = self.text[cut:]
        self._pieces = self._pieces[piece:]
        self._starts = [s - cut for s in self._starts[piece:]]
        return cut


def _show(data: bytes) -> str:
    """Bytes as text: UTF-8, each invalid byte shown as U+FFFD (one character per byte)."""
    text = data.decode("utf-8", errors="surrogateescape")
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


@dataclass(frozen=True)
class OutputMatch:
    text: str
    groups: tuple[str, ...]
    start_offset: int
    end_offset: int


class OutputMatcher:
    """Searches a regex in output from an offset on, incrementally."""

    def __init__(self, regex: Regex, offset: int, raw: bool) -> None:
        self.regex = regex
        self.output = OutputText(offset, raw)
        self._searched = 0  # text before this index had no match starting in it

    def feed(self, data: bytes) -> OutputMatch | None:
        self.output.feed(data)
        text = self.output.text
        match = self.regex.search(text, max(0, self._searched - OVERLAP))
        if match is None:
            self._searched = len(text)
            if len(text) > WINDOW:
                self._searched -= self.output.trim(OVERLAP)
            return None
        return OutputMatch(
            match.text,
            match.groups,
            self.output.offset_of(match.start),
            self.output.end_offset_of(match.end)
            if match.end > match.start
            else self.output.offset_of(match.start),
        )


class HeadTail:
    """The first and last ``limit`` characters of output text, and its total length."""

    def __init__(self, offset: int, limit: int) -> None:
        self._text = OutputText(offset)
        self.limit = limit
        self.head = ""
        self.tail = ""
        self.total = 0

    def feed(self, data: bytes) -> None:
        added = self._text.feed(data)
        self._text.clear()
        self.total += len(added)
        if len(self.head) < self.limit:
            self.head += added[: self.limit - len(self.head)]
        self.tail = (self.tail + added)[-self.limit :]

    @property
    def truncated(self) -> bool:
        return self.total > 2 * self.limit
