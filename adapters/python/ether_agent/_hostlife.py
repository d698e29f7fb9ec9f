"""Start-up checks and host death: the cookie, signals, PR_SET_PDEATHSIG and a ppid watch.

Protocol rule 12: an adapter exits on stdin EOF, arms a parent-death signal and polls its
parent pid every second; before exiting because the host died it kills its own process group,
so no grandchild outlives the host.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import NoReturn

from ._io import diag
from ._libc import set_parent_death_signal

COOKIE = "ether-agent-v1"
EXIT_FATAL = 78
POLL_S = 1.0

_host_dead = threading.Event()


def check_cookie() -> None:
    """Exit 78 with a human hint unless started by an Ether host."""
    if os.environ.get("ETHER_HOST_COOKIE") == COOKIE:
        return
    sys.stderr.write(
        "This is an Ether agent: it speaks the Ether stdio protocol and is started by the Ether\n"
        "host (`ether serve`), not by hand. To try it anyway, set the host's cookie:\n"
        f"  ETHER_HOST_COOKIE={COOKIE} ETHER_PROTOCOL_VERSIONS=1 {' '.join(sys.argv)}\n"
        "(To see the actions it declares: python -m ether_agent --describe --module ...)\n"
    )
    sys.stderr.flush()
    raise SystemExit(EXIT_FATAL)


def _host_ppid() -> int | None:
    try:
        value = int(os.environ.get("ETHER_HOST_PPID", ""))
    except ValueError:
        return None
    return value if value > 1 else None


class HostWatch:
    """Notices the host's death: PR_SET_PDEATHSIG(SIGTERM) plus a 1 s parent-pid poll."""

    def __init__(self) -> None:
        self.host_ppid = _host_ppid()
        self.start_ppid = os.getppid()

    def arm(self) -> None:
        """Call from the main thread: the parent-death signal is held per thread."""
        if sys.platform.startswith("linux"):
            set_parent_death_signal(signal.SIGTERM)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host owns Ctrl-C
        signal.signal(signal.SIGTERM, self._early_sigterm)
        threading.Thread(target=self._poll, name="ether-hostwatch", daemon=True).start()
        if not self.host_alive():  # the host died before the signal was armed
            host_died("host exited before the agent started")

    def host_alive(self) -> bool:
        if os.getppid() != self.start_ppid:
            return False
        if self.host_ppid is not None and self.host_ppid != self.start_ppid:
            try:
                os.kill(self.host_ppid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                pass
        return True

    def _poll(self) -> None:
        while True:
            time.sleep(POLL_S)
            if not self.host_alive():
                host_died(f"parent pid changed from {self.start_ppid} to {os.getppid()}")

    def _early_sigterm(self, signum: int, frame: object) -> None:
        """SIGTERM before the runtime loop installs its own handler."""
        if not self.host_alive():
            host_died("parent-death signal")
        diag("SIGTERM before serving; exiting")
        os._exit(0)


def host_died(why: str) -> NoReturn:
    """The host is gone: take the whole process group down (grandchildren included)."""
    if not _host_dead.is_set():
        _host_dead.set()
        diag(f"host is gone ({why}); stopping the process group")
    try:
        if os.getpgrp() == os.getpid():  # never signal a group we do not lead (e.g. a shell's)
            os.killpg(0, signal.SIGTERM)  # our own SIGTERM handler sees _host_dead and waits
            time.sleep(0.3)
            os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(1)


def host_is_dead() -> bool:
    return _host_dead.is_set()


def kill_group_members() -> None:
    """SIGKILL every other process of the group this agent leads.

    Called on the way out, so nothing the agent started outlives it, also when
    the host is gone and cannot clean up after it (kill -9 of the host: stdin
    EOF usually arrives before the parent-death signal).
    """
    me = os.getpid()
    if os.getpgrp() != me:
        return
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                stat = handle.read()
            if int(stat[stat.rindex(")") + 2 :].split()[2]) == me:
                os.kill(int(name), signal.SIGKILL)
        except (OSError, ValueError):
            continue
