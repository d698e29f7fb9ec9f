"""Hand the memory glibc's allocator kept after a large piece of work back to the OS.

glibc's malloc keeps what the process frees in its heap for the allocations to come, and
gives the free pages back only when asked (``malloc_trim``) or when the top of the heap is
free. A 100,000-task workflow run frees tens of MiB of SQLite pages, gRPC buffers and large
Python objects at its end; without a trim the host's RSS stayed that much above idle for as
long as it stayed idle (bench/RESULTS.md, "Batching", "100,000-task map").

Python's small objects live in the interpreter's own arenas, not glibc's: an arena goes back
to the OS by itself once every object in it is freed, and a trim does nothing for one that
still holds a single object.

Linux with glibc only; elsewhere (musl, macOS) ``trim`` does nothing and returns None.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        function: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return function


def resident_bytes() -> int:
    """This process's RSS (bytes) from /proc/self/statm; 0 where there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def trim() -> int | None:
    """``malloc_trim(0)``: glibc's free pages back to the OS. The bytes the RSS fell by
    meanwhile (other threads allocating at the same time make it an estimate, and may make it
    negative); None where there is no glibc.

    Blocking, and it holds each of glibc's arenas locked while it trims it (1-9 ms after a
    100,000-task run here): call it from a worker thread, never from the event loop."""
    malloc_trim = _malloc_trim()
    if malloc_trim is None:
        return None
    before = resident_bytes()
    malloc_trim(0)
    return before - resident_bytes()
