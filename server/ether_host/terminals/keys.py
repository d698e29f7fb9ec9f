"""Named keys, control characters and pastes as the bytes a terminal sends (xterm)."""

from __future__ import annotations

from dataclasses import dataclass

from ether_host.errors import FieldViolation, InvalidArgument, QuotaViolation, ResourceExhausted
from ether_host.reasons import Reason

MAX_REPEAT = 1000
PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"

_PLAIN = {
    "ENTER": b"\r",
    "TAB": b"\t",
    "ESCAPE": b"\x1b",
    "BACKSPACE": b"\x7f",
    "PAGE_UP": b"\x1b[5~",
    "PAGE_DOWN": b"\x1b[6~",
    "DELETE": b"\x1b[3~",
    "INSERT": b"\x1b[2~",
    "F1": b"\x1bOP",
    "F2": b"\x1bOQ",
    "F3": b"\x1bOR",
    "F4": b"\x1bOS",
    "F5": b"\x1b[15~",
    "F6": b"\x1b[17~",
    "F7": b"\x1b[18~",
    "F8": b"\x1b[19~",
    "F9": b"\x1b[20~",
    "F10": b"\x1b[21~",
    "F11": b"\x1b[23~",
    "F12": b"\x1b[24~",
}
# Cursor keys: CSI form normally, SS3 form in application cursor mode (DECCKM, as vim and less set it).
_CURSOR = {"UP": b"A", "DOWN": b"B", "RIGHT": b"C", "LEFT": b"D", "HOME": b"H", "END": b"F"}
_CTRL_SPECIAL = {"@": 0, "[": 27, "\\": 28, "]": 29, "^": 30, "_": 31, "?": 127, " ": 0}
KEY_NAMES = tuple(_PLAIN) + tuple(_CURSOR)


@dataclass(frozen=True)
class InputSpec:
    """One piece of input as the caller gave it (exactly one of data, text, key, ctrl)."""

    data: bytes | None = None
    text: str | None = None
    key: str | None = None
    ctrl: str | None = None
    alt: bool = False
    repeat: int = 0
    paste: bool = False


def key_bytes(name: str, app_cursor: bool) -> bytes:
    """The bytes of a named key; ``app_cursor`` selects the application cursor-key form."""
    upper = name.upper()
    if upper in _PLAIN:
        return _PLAIN[upper]
    if upper in _CURSOR:
        return (b"\x1bO" if app_cursor else b"\x1b[") + _CURSOR[upper]
    raise InvalidArgument(
        f"unknown key {name!r}; known keys: {', '.join(KEY_NAMES)}",
        reason=Reason.UNKNOWN_KEY,
        violations=[FieldViolation("input.key", "a named key")],
    )


def ctrl_byte(letter: str) -> bytes:
    """Ctrl-<letter>: a-z, @ [ \\ ] ^ _ or ? (DEL)."""
    if len(letter) == 1 and letter.isascii() and letter.isalpha():
        return bytes([ord(letter.lower()) - ord("a") + 1])
    if letter in _CTRL_SPECIAL:
        return bytes([_CTRL_SPECIAL[letter]])
    raise InvalidArgument(
        f"ctrl {letter!r} is not a control character; use one letter a-z or one of @ [ \\ ] ^ _ ?",
        reason=Reason.INVALID_CTRL,
        violations=[FieldViolation("input.ctrl", "a-z, @ [ \\ ] ^ _ or ?")],
    )


def encode(
    spec: InputSpec,
    *,
    app_cursor: bool,
    bracketed_paste: bool,
    max_bytes: int,
    subject: str = "input",
) -> bytes:
    """The bytes to write for ``spec``, honouring the program's modes; past ``max_bytes`` (the
    input queue) RESOURCE_EXHAUSTED with ``subject`` (the terminal) as its quota's subject."""
    repeat = spec.repeat or 1
    if not 1 <= repeat <= MAX_REPEAT:
        raise InvalidArgument(
            f"repeat {spec.repeat} is out of range 1..{MAX_REPEAT} (0 means 1)",
            reason=Reason.INVALID_REPEAT,
            violations=[FieldViolation("input.repeat", "0 to 1000")],
        )
    if spec.data is not None:
        one = spec.data
    elif spec.text is not None:
        one = spec.text.encode("utf-8", errors="surrogateescape")
        if spec.paste and bracketed_paste:
            # A paste must not be able to end the bracket early and type commands.
            one = PASTE_START + one.replace(PASTE_END, b"") + PASTE_END
    elif spec.key is not None:
        one = key_bytes(spec.key, app_cursor)
        if spec.alt:
            one = b"\x1b" + one
    elif spec.ctrl is not None:
        one = ctrl_byte(spec.ctrl)
        if spec.alt:
            one = b"\x1b" + one
    else:
        raise InvalidArgument(
            "input: set one of data, text, key or ctrl",
            reason=Reason.EMPTY_INPUT,
            violations=[FieldViolation("input", "no input given")],
        )
    if not one:
        raise InvalidArgument(
            "input is empty",
            reason=Reason.EMPTY_INPUT,
            violations=[FieldViolation("input", "empty data or text")],
        )
    if len(one) * repeat > max_bytes:
        raise ResourceExhausted(
            f"{len(one) * repeat} bytes of input exceed the terminal's input queue of {max_bytes} bytes",
            reason=Reason.INPUT_TOO_LARGE,
            quota_violations=[QuotaViolation(subject, f"at most {max_bytes} bytes")],
        )
    return one * repeat
