"""A forked cold child's output: its file descriptors and pytest's inherited capture, pointed
at its own directory's files (which the parent reads even when the child is killed).
"""

from __future__ import annotations

import faulthandler
import io
import os
from typing import Any

import pytest

from pytest_coldcompile.records import (
    CAPTURED_ERR,
    CAPTURED_OUT,
    redirect_std_fds,
)


def retarget_capture(config: pytest.Config, test_dir: str, keep: bool) -> None:
    """Point the global capture this child already has at the child's own files, keeping
    every stream object of it: code that bound ``sys.stdout`` or ``sys.stderr`` at import
    or collection (``from sys import stdout``, a logging handler, a parameter) still holds
    the live streams, and what it writes lands in this test's captured output.

    Call it with fds 0, 1 and 2 already redirected (``redirect_fds`` or a spawned child's
    own). keep: whether what the capture holds now belongs to this child (a re-collecting
    child's own, printed while it collected) rather than to the process it was forked from.
    """
    capman = config.pluginmanager.getplugin("capturemanager")
    multi = getattr(capman, "_global_capturing", None)
    if capman is None or multi is None or not capman.is_globally_capturing():
        return  # -s: sys.stdout is the process's own stream, on the child's fd 1 already
    capman.suspend_global_capture()
    # Read only a capture of this process's own: a forked child's fd capture files are still
    # the parent's (one open file shared), which a read would truncate under the parent.
    held = multi.readouterr() if keep else None
    for capture in (multi.in_, multi.out, multi.err):
        saved = getattr(capture, "targetfd_save", None)
        if isinstance(saved, int):
            # fd capture: between phases the fd is given back to what it was; here that is
            # the child's raw file (or /dev/null), not the parent's terminal.
            os.dup2(capture.targetfd, saved)
    for capture, name in ((multi.out, CAPTURED_OUT), (multi.err, CAPTURED_ERR)):
        if not isinstance(getattr(capture, "targetfd_save", None), int):
            continue  # sys and tee-sys capture live in memory: a kill loses the phase's output
        # A named file under the same EncodedFile, instead of the anonymous one the parent
        # shares (fork) or one the parent cannot read: the parent reads it when the child
        # is killed.
        named = os.open(os.path.join(test_dir, name), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.dup2(named, capture.tmpfile.fileno())
        finally:
            os.close(named)
    if held is None:
        multi.readouterr()  # the forked child's own files now; in memory, its parent's copy
        return
    for capture, text in ((multi.out, held.out), (multi.err, held.err)):
        if capture is not None and text:
            # TextIOWrapper's own write: a tee-sys stream would echo it a second time.
            io.TextIOWrapper.write(capture.tmpfile, text)

_fault_file: Any = None


def redirect_fds(test_dir: str) -> None:
    global _fault_file
    redirect_std_fds(test_dir)
    # pytest's faulthandler writes to a copy of the terminal's stderr; a crash dump belongs
    # in the report, so point it at the child's own stderr file.
    _fault_file = os.fdopen(os.dup(2), "w")
    faulthandler.enable(file=_fault_file)
