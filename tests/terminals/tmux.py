"""The reference renderer for the fidelity tests: the same program, keys and size in tmux.

tmux runs on a private socket with a config of our own (no status line, TERM
xterm-256color, no escape delay), the program under ``env -i`` with the same
environment the Ether terminal gets. ``capture-pane -p`` prints the visible
lines with trailing spaces removed -- the form ReadScreen returns.

tmux has no "screen settled" event, so ``settle`` polls capture-pane until the
expected text is there and two captures in a row agree.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

CONFIG = 'set -g status off\nset -g default-terminal "xterm-256color"\nset -g escape-time 0\n'
POLL = 0.05


def available() -> bool:
    return shutil.which("tmux") is not None


class Tmux:
    """One tmux server with one pane running ``argv``."""

    def __init__(
        self, folder: Path, argv: list[str], env: dict[str, str], rows: int, cols: int, cwd: str
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.socket = str(folder / "tmux.sock")
        config = folder / "tmux.conf"
        config.write_text(CONFIG)
        pairs = [f"{k}={v}" for k, v in env.items()]
        self._tmux(
            "-f",
            str(config),
            "new-session",
            "-d",
            "-x",
            str(cols),
            "-y",
            str(rows),
            "-c",
            cwd,
            "env",
            "-i",
            *pairs,
            *argv,
        )

    def _tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", self.socket, *args], check=True, capture_output=True, text=True
        ).stdout

    def type(self, text: str) -> None:
        """Type ``text`` literally (\\r is Enter)."""
        for part in re.split(r"(\r)", text):
            if part == "\r":
                self._tmux("send-keys", "Enter")
            elif part:
                self._tmux("send-keys", "-l", part)

    def key(self, name: str) -> None:
        """A tmux key name: Escape, Enter, Space, PageDown, C-c ..."""
        self._tmux("send-keys", name)

    def capture(self) -> list[str]:
        return self._tmux("capture-pane", "-p").split("\n")[:-1]

    def cursor(self) -> tuple[int, int]:
        x, y = self._tmux("display", "-p", "#{cursor_x},#{cursor_y}").strip().split(",")
        return int(y), int(x)

    def settle(self, regex: str, timeout: float = 30.0) -> list[str]:
        """The screen once ``regex`` matches it and it stopped changing."""
        pattern = re.compile(regex, re.MULTILINE)
        deadline = time.monotonic() + timeout
        previous: list[str] | None = None
        while time.monotonic() < deadline:
            lines = self.capture()
            # As WaitFor does: the cursor's line keeps the spaces before the cursor.
            shown = list(lines)
            row, col = self.cursor()
            if 0 <= row < len(shown):
                shown[row] = shown[row].ljust(col)
            found = pattern.search("\n".join(shown)) is not None
            if found and lines == previous:
                return lines
            previous = lines if found else None
            time.sleep(POLL)
        raise AssertionError(
            f"tmux never showed {regex!r}; last screen:\n" + "\n".join(self.capture())
        )

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, check=False)
