"""Process helpers of the cold engine: a child that must not outlive the process that started
it, and killing a child's whole process group."""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
from typing import NoReturn

_PR_SET_PDEATHSIG = 1


def die_with_parent(expected_parent: int | None = None) -> None:
    """Have the kernel kill this process when its parent dies (no-op off Linux).

    A cold child stuck in a compile would otherwise outlive a pytest that was killed.
    ``expected_parent`` is the parent's pid recorded before the fork: if the parent died
    before the request took effect, this process was already re-parented and exits now.
    """
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid() if expected_parent is None else expected_parent
    try:
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


_exit_report_fd: int | None = None


def report_exit_to(fd: int) -> None:
    """Have ``exit_now`` write its exit code (one byte) to ``fd`` before the process exits."""
    global _exit_report_fd
    _exit_report_fd = fd


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    # Loaded once, in the fork server, and inherited: every cold child arms its death signal.
    return ctypes.CDLL(None, use_errno=True)


def exit_now(code: int) -> NoReturn:
    """Flush Python's streams and leave with os._exit: a forked child must not run the
    parent's atexit handlers or finalizers, but what it printed must reach its files.

    A fork server's child also tells the server its exit code first: tearing down the
    address space of a process forked from one holding torch takes about 10 ms, which the
    next test need not wait for."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # a closed or broken stream must not keep the child alive
            pass
    if _exit_report_fd is not None:
        try:
            os.write(_exit_report_fd, bytes([code & 0xFF]))
        except OSError:
            pass
        _yield_the_cpu()
    os._exit(code)


def _yield_the_cpu() -> None:
    """Lowest CPU priority for the rest of this process's life: its exit (the teardown of an
    address space that holds torch, about 10 ms of kernel time) then runs when a core is
    free, not against the next test's child."""
    try:
        os.nice(19)
    except OSError:
        pass


_MADV_COLLAPSE = 25  # Linux 6.1
_HUGE = 2 << 20


def collapse_heap() -> int:
    """Back this process's anonymous read-write memory with huge pages where the kernel can
    (MADV_COLLAPSE, Linux 6.1 and later; elsewhere nothing happens); the bytes collapsed.

    For a fork server: a fork copies one page-table entry per mapped 4 KiB page, and a child's
    exit drops each again, so a server holding torch spends milliseconds of kernel time on
    every child; a huge page is one entry. Nothing a child sees changes: its first write to a
    shared huge page splits the mapping in the child and copies 4 KiB, as before.
    """
    if not sys.platform.startswith("linux"):
        return 0
    try:
        madvise = _libc().madvise
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    collapsed = 0
    for line in maps:
        fields = line.split()
        # Anonymous memory and the brk heap; never files, stacks or special mappings.
        if fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        start = -(-start // _HUGE) * _HUGE
        end = end // _HUGE * _HUGE
        if end - start >= _HUGE and madvise(start, end - start, _MADV_COLLAPSE) == 0:
            collapsed += end - start
    return collapsed


def kill_group(pgid: int) -> None:
    """SIGKILL every process of group ``pgid``; a group that is gone already is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
