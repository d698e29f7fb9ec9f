"""The reference renderer for the fidelity tests: the same program, keys and size in tmux.

tmux runs on a private socket with a config of our own (no status line, TERM
xterm-256color, no escape delay), the program under ``env -i`` with the same
environment the Ether terminal gets. ``capture-pane -p`` prints the visible
lines with trailing spaces removed -- the form ReadScreen returns.

tmux has no "screen settled" event, so ``settle`` polls capture-pane until the
expected text is there and two captures in a row agree.

``capture-pane`` prints the cells as tmux stores them, and tmux stores DEC special
graphics as the letters the program wrote (``lqqk``) with a character-set flag: it
translates them (to ``┌──┐``) only when it draws the pane for a client. With
``shown=True`` the pane is captured as a client draws it: a tmux client attached to
it runs in a pane of a second tmux server, and that outer pane is captured -- what a
person looking at tmux sees.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

PATH = "/usr/bin:/bin"
CONFIG = 'set -g status off\nset -g default-terminal "xterm-256color"\nset -g escape-time 0\n'
POLL = 0.05


def available() -> bool:
    return shutil.which("tmux") is not None


class Tmux:
    """One tmux server with one pane running ``argv``."""

    def __init__(
        self,
        folder: Path,
        argv: list[str],
        env: dict[str, str],
        rows: int,
        cols: int,
        cwd: str,
        shown: bool = False,
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
        self._view: str | None = None
        if shown:
            self._view = str(folder / "view.sock")
            client = ["tmux", "-u", "-S", self.socket, "attach"]  # -u: the client draws UTF-8
            client_env = [f"PATH={PATH}", "TERM=xterm-256color", "LANG=C.UTF-8"]
            size = ["-x", str(cols), "-y", str(rows)]
            self._tmux(
                "-f", str(config), "new-session", "-d", *size, "env", "-i", *client_env, *client,
                view=True,
            )  # fmt: skip

    def _tmux(self, *args: str, view: bool = False) -> str:
        socket = self._view if view and self._view else self.socket
        return subprocess.run(
            ["tmux", "-S", socket, *args], check=True, capture_output=True, text=True
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
        return self._tmux("capture-pane", "-p", view=True).split("\n")[:-1]

    def cursor(self) -> tuple[int, int]:
        x, y = self._tmux("display", "-p", "#{cursor_x},#{cursor_y}", view=True).strip().split(",")
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
        for socket in (self._view, self.socket):
            if socket:
                subprocess.run(
                    ["tmux", "-S", socket, "kill-server"], capture_output=True, check=False
                )
