"""Two libc calls: the parent-death signal, and handing the heap's free pages back to the OS.

They go through _ctypes, the C half of ctypes, not the ctypes package: importing ctypes builds
some forty classes, which held 0.2 MiB of each idle agent's private memory (bench/scale.py's
USS: 0.15 MiB of 12.2) for two calls that take and return C ints. Where _ctypes is not what
this module expects (another Python), ctypes itself makes the calls.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from ._io import diag

PR_SET_PDEATHSIG = 1


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


def _function(name: str) -> Callable[..., int]:
    """The libc function ``name``, taking and returning C ints, errno kept for ``_errno``.
    Raises AttributeError when libc has no such function."""
    try:
        return _lean_function(name)
    except (ImportError, TypeError):
        import ctypes

        function: Callable[..., int] = getattr(ctypes.CDLL(None, use_errno=True), name)
        return function


def _lean_function(name: str) -> Callable[..., int]:
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

    function: Callable[..., int] = Function((name, Libc()))
    return function


def _errno() -> int:
    import _ctypes

    errno: int = _ctypes.get_errno()  # ctypes.get_errno is this function
    return errno
