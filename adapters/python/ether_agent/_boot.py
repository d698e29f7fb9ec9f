"""Start-up before user code loads: the cookie, the host watch, fd hygiene, the version."""

from __future__ import annotations

import contextlib
import os
from typing import NoReturn

from ._context import int64
from ._errors import PROTOCOL_VERSION_UNSUPPORTED
from ._hostlife import EXIT_FATAL, HostWatch, check_cookie
from ._io import Channel, diag, encode, take_stdio

SUPPORTED_PROTOCOLS = (1,)
HOST_MAX_FRAME_DEFAULT = 16 * 1024 * 1024


class Boot:
    """What start-up settled before user code loaded. (This and the link's other internal
    records are plain classes: each dataclass compiles its methods when its module loads, and
    four of them were 0.03 MiB of each idle agent's private memory.)"""

    __slots__ = ("channel", "host_max_frame", "protocol", "watch")

    def __init__(
        self, channel: Channel, protocol: int, host_max_frame: int, watch: HostWatch
    ) -> None:
        self.channel = channel
        self.protocol = protocol
        self.host_max_frame = host_max_frame
        self.watch = watch


_boot: Boot | None = None


def boot() -> Boot:
    """Cookie, host watch, fd hygiene and version choice; once per process, before user code."""
    global _boot
    if _boot is not None:
        return _boot
    check_cookie()
    watch = HostWatch()
    watch.arm()
    channel = take_stdio()
    offered = _parse_versions(os.environ.get("ETHER_PROTOCOL_VERSIONS", "1"))
    common = sorted(set(offered) & set(SUPPORTED_PROTOCOLS))
    if not common:
        fatal(
            channel,
            PROTOCOL_VERSION_UNSUPPORTED,
            f"the host offers protocol versions {offered or '(none)'}; "
            f"this adapter speaks {list(SUPPORTED_PROTOCOLS)}",
        )
    host_max = int64(os.environ.get("ETHER_MAX_FRAME"), HOST_MAX_FRAME_DEFAULT)
    if host_max <= 0:
        host_max = HOST_MAX_FRAME_DEFAULT
    _boot = Boot(channel, common[-1], host_max, watch)
    return _boot


def _parse_versions(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        try:
            out.append(int(part.strip()))
        except ValueError:
            continue
    return out


def fatal(channel: Channel, code: str, message: str) -> NoReturn:
    """Write a ``fatal`` frame ("never restart me") and exit 78."""
    diag(f"fatal: {code}: {message}")
    with contextlib.suppress(OSError):
        os.write(channel.out_fd, encode({"type": "fatal", "code": code, "message": message}))
    os._exit(EXIT_FATAL)
