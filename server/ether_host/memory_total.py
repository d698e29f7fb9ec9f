"""The agents' total memory: one cap on every agent replica and terminal together
(``[limits] total_memory``), held by the kernel on the host's own control group.

Every child's memory group lives under the host's ``ether-<pid>`` group in the cgroup v1
memory hierarchy, and the host process itself stays outside it (in the group it was started
in). With hierarchical accounting (``memory.use_hierarchy`` = 1) the ``ether-<pid>`` group's
``memory.limit_in_bytes`` bounds what all of its children use together: past it the kernel's
OOM killer picks a victim inside that group's tree -- the largest agent or terminal process --
never the host.

Which limit an OOM kill was for is read from the kernel's counters. ``ether-<pid>``'s
``memory.failcnt`` counts the charges refused at the total, so a rise during a child's life
says the total was hit. A child's own group has a memory+swap limit too, and the kernel keeps
no failcnt on that counter (recent kernels keep it on ``memory`` alone), so its own limit counts as
hit when its peak usage (``memory.max_usage_in_bytes``, ``memory.memsw.max_usage_in_bytes``;
the group is new for each process) came within a charge of the limit. The total is set on
``memory`` alone for the same reason: where swap is on, it bounds RAM, not swap. The words are
made here, once, for the replica's exit reason, the WatchEvents event and the error of a task
that was running on it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

DEFAULT_SHARE = 0.8  # of the machine's memory, or of the host's own cgroup limit if smaller
NO_LIMIT = 1 << 62  # cgroup v1 reports "no limit" as a value near 2**63
MIB = 1 << 20
CHARGE_SLACK = 4 * MIB  # how far below its limit a refused charge may leave a group


def parse_total(value: Any, size: Any) -> int | None:
    """``total_memory`` from the config: None for "auto" (the default), 0 for "off" (or 0,
    "unlimited"), else bytes via ``size``; ValueError says what is wrong."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    if isinstance(value, str) and value.strip().lower() == "off":
        return 0
    parsed: int = size(value)
    return parsed


def machine_memory() -> int:
    """MemTotal from /proc/meminfo in bytes (0 when unreadable)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def inherited_limit(mount: Path, own: str) -> int:
    """The lowest ``memory.limit_in_bytes`` of the host's own v1 memory group and its
    ancestors up to the mount (0: none of them limits it)."""
    lowest = 0
    path = mount / own.lstrip("/")
    while True:
        with contextlib.suppress(OSError, ValueError):
            value = int((path / "memory.limit_in_bytes").read_text())
            if 0 < value < NO_LIMIT and (lowest == 0 or value < lowest):
                lowest = value
        if path == mount or mount not in path.parents:
            return lowest
        path = path.parent


def default_total(mount: Path, own: str) -> int:
    """80 % of the machine's memory or of the host's own cgroup limit, whichever is smaller,
    in whole MiB."""
    room = [size for size in (machine_memory(), inherited_limit(mount, own)) if size]
    if not room:
        return 0
    return int(min(room) * DEFAULT_SHARE) // MIB * MIB


def apply_total(base: Path, total: int) -> None:
    """Cap ``base`` (the host's ``ether-<pid>`` memory group, with no child group yet) at
    ``total`` bytes for everything under it; OSError or RuntimeError says why it cannot."""
    hierarchy = base / "memory.use_hierarchy"
    if hierarchy.read_text().strip() != "1":
        # Settable only while the group has no children, which is now.
        hierarchy.write_text("1")
        if hierarchy.read_text().strip() != "1":
            raise RuntimeError(
                "memory.use_hierarchy stays 0: children's memory would not count towards it"
            )
    # Not memory.memsw: the kernel checks that counter first and keeps no failcnt on it, so a
    # kill at the total could not be told from one at the machine's limit.
    (base / "memory.limit_in_bytes").write_text(str(total))
    if int((base / "memory.limit_in_bytes").read_text()) > total:
        raise RuntimeError("the kernel did not keep memory.limit_in_bytes")


def failures(group: Path) -> int:
    """Charges refused at ``group``'s own limit (memory and memory+swap)."""
    count = 0
    for name in ("memory.failcnt", "memory.memsw.failcnt"):
        with contextlib.suppress(OSError, ValueError):
            count += int((group / name).read_text())
    return count


def reached(group: Path, limit: int) -> bool:
    """``group``'s peak usage came within a charge (a huge page and a batch) of ``limit``."""
    peak = 0
    for name in ("memory.max_usage_in_bytes", "memory.memsw.max_usage_in_bytes"):
        with contextlib.suppress(OSError, ValueError):
            peak = max(peak, int((group / name).read_text()))
    return bool(limit) and peak >= limit - CHARGE_SLACK


def own_words(size: str) -> str:
    return f"memory limit {size} exceeded"


def total_words(size: str) -> str:
    return f"agents' total memory limit {size} exceeded"


OUTSIDE_WORDS = (
    "out of memory outside the agents' limits (the machine's, or the host's own control group's)"
)


def oom_words(own_hit: bool, own_size: str, total_hit: bool, total_size: str) -> list[str]:
    """What an OOM kill in a child's memory group was for, in words."""
    found = []
    if own_hit:
        found.append(own_words(own_size))
    if total_hit:
        found.append(total_words(total_size))
    return found or [OUTSIDE_WORDS]


__all__ = [
    "apply_total",
    "default_total",
    "failures",
    "inherited_limit",
    "machine_memory",
    "oom_words",
    "parse_total",
    "reached",
]
