"""What the resource-limit tests read from the kernel and the host's start log: the mechanism
per limit, a pids group's refused forks, and the processes a fork bomb left."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.host import HostProcess

PIDS_ROOT = Path("/sys/fs/cgroup/pids")


def mechanisms(host: HostProcess) -> dict[str, str]:
    """What enforces each limit, as the host logged it at start ("resource limits")."""
    record = host.wait_for_log(lambda r: r.get("event") == "resource limits")
    return dict(record["mechanisms"])


def refused_forks(group: Path) -> int:
    """How many forks the pids cgroup ``group`` refused (its pids.events ``max``)."""
    try:
        for line in (group / "pids.events").read_text().splitlines():
            if line.startswith("max "):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def marked(marker: str) -> list[int]:
    """Live processes (not zombies) whose command line carries ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                command = Path(f"/proc/{name}/cmdline").read_bytes()
                state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if marker.encode() in command and state != "Z":
                found.append(int(name))
    return found
