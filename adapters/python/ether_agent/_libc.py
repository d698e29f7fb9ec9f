"""Three libc calls: the parent-death signal, handing the heap's free pages back to the OS, and
handing back the zero pages of one large object (uvloop's loop).

They go through _ctypes, the C half of ctypes, not the ctypes package: importing ctypes builds
some forty classes, which held 0.2 MiB of each idle agent's private memory (bench/scale.py's
USS: 0.15 MiB of 12.2) for three calls that take C ints and pointers. Where _ctypes is not what
this module expects (another Python), ctypes itself makes the calls.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

from ._io import diag

PR_SET_PDEATHSIG = 1
MADV_DONTNEED = 4  # Linux: the pages read back as zeros, and hold no memory until written


def set_parent_death_signal(signum: int) -> None:
    """prctl(PR_SET_PDEATHSIG, signum): the kernel sends ``signum`` when the parent exits."""
    try:
        prctl = _function("prctl")
        if prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
            diag(f"prctl(PR_SET_PDEATHSIG) failed: errno {_errno()}")
    except (OSError, AttributeError) as exc:
        diag(f"prctl unavailable: {exc}")


def release_free_memory() -> None:
    """malloc_trim(0): the heap's free pages go back to the OS (glibc; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):  # no malloc_trim: not glibc
        _function("malloc_trim")(0)


def release_zero_pages(address: int, size: int) -> int:
    """Hand back to the OS the whole pages of ``[address, address + size)`` that hold only
    zeros (madvise MADV_DONTNEED: they read back as zeros, so nothing changes for the code
    that owns them, and hold no memory until written again); the number of bytes released.

    For one object nothing else can write to while this runs (the caller's own, just made):
    a page written between the check and the madvise would lose the write. Linux only;
    elsewhere, or when /proc/self/mem cannot be read, nothing happens.
    """
    if not sys.platform.startswith("linux"):
        return 0
    page = os.sysconf("SC_PAGE_SIZE")
    start = -(-address // page) * page
    end = (address + size) // page * page
    zeros = bytes(page)
    released = 0
    try:
        madvise = _function("madvise", pointer_and_size=True)
        fd = os.open("/proc/self/mem", os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return 0
    try:
        run = start  # the first page of the current run of zero pages
        for at in range(start, end + page, page):
            if at < end and os.pread(fd, page, at) == zeros:
                continue
            if at > run and madvise(run, at - run, MADV_DONTNEED) == 0:
                released += at - run
            run = at + page
    except OSError as exc:
        diag(f"releasing zero pages failed: {exc}")
    finally:
        os.close(fd)
    return released


def _function(name: str, *, pointer_and_size: bool = False) -> Callable[..., int]:
    """The libc function ``name``, returning a C int, errno kept for ``_errno``; its arguments
    C ints, or with ``pointer_and_size`` a pointer, a size_t and a C int (``madvise``).
    Raises AttributeError when libc has no such function."""
    try:
        return _lean_function(name, pointer_and_size)
    except (ImportError, TypeError):
        import ctypes

        function: Any = getattr(ctypes.CDLL(None, use_errno=True), name)
        if pointer_and_size:
            function.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        found: Callable[..., int] = function
        return found


def _lean_function(name: str, pointer_and_size: bool) -> Callable[..., int]:
    """What ``ctypes.CDLL(None, use_errno=True).<name>`` builds, from _ctypes alone."""
    import _ctypes

    lib: Any = _ctypes

    class CInt(lib._SimpleCData):  # type: ignore[misc]  # ctypes.c_int, by the same recipe
        _type_ = "i"

    class Function(lib.CFuncPtr):  # type: ignore[misc]  # CDLL's _FuncPtr
        _flags_ = lib.FUNCFLAG_CDECL | lib.FUNCFLAG_USE_ERRNO
        _restype_ = CInt

    class Libc:  # what a function looks up its symbol in: a dlopen handle
        _handle = lib.dlopen(None, os.RTLD_NOW)

    function: Any = Function((name, Libc()))
    if pointer_and_size:

        class CVoidP(lib._SimpleCData):  # type: ignore[misc]  # ctypes.c_void_p
            _type_ = "P"

        class CSizeT(lib._SimpleCData):  # type: ignore[misc]  # ctypes.c_size_t: unsigned long on Linux
            _type_ = "L"

        function.argtypes = (CVoidP, CSizeT, CInt)
    found: Callable[..., int] = function
    return found


def _errno() -> int:
    import _ctypes

    errno: int = _ctypes.get_errno()  # ctypes.get_errno is this function
    return errno
