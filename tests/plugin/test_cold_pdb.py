"""--pdb in the cold child: under a pseudo-terminal the failing child takes the terminal, the
post-mortem debugger runs in the cold process (its locals, its pid), and the session goes on.
Without a terminal the failure is reported as before, with the reason.
"""

from __future__ import annotations

import os
import pty
import select
import sys
import time

import pytest
from coldhelp import LIGHT_PRELOAD, needs_fork, run

pytestmark = needs_fork

FAILING = """
import os, pytest

@pytest.mark.cold_compile
def test_cold_only():
    local = "seen in pid %d" % os.getpid()
    assert local == "never"

@pytest.mark.cold_compile
def test_after():
    pass
"""


class Terminal:
    """A pytest process on a pseudo-terminal of its own (its controlling terminal)."""

    def __init__(self, cwd: str, *args: str) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: becomes pytest, the pty its terminal
            try:
                os.chdir(cwd)
                os.execv(sys.executable, [sys.executable, "-m", "pytest", *args])
            finally:
                os._exit(127)
        self.seen = b""

    def expect(self, text: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} not seen; got:\n{self.text()}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: the other side closed
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"{text!r} not seen before the end; got:\n{self.text()}")
                self.seen += chunk
        return self.seen.decode(errors="replace")

    def text(self) -> str:
        return self.seen.decode(errors="replace")

    def send(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def finish(self, timeout: float = 120) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    chunk = b""
                self.seen += chunk
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, 9)
        raise AssertionError("pytest did not end:\n" + self.seen.decode(errors="replace"))


@pytest.mark.parametrize("mode", ["fork", "zygote"])
def test_pdb_runs_in_the_failing_cold_child_under_a_terminal(
    pytester: pytest.Pytester, mode: str
) -> None:
    pytester.makepyfile(test_cold=FAILING)
    pytester._monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [os.environ.get("PYTHONPATH", ""), str(pytester.path)])))
    term = Terminal(str(pytester.path), "-p", "no:cacheprovider", "--pdb",
                    f"--cold-compile-mode={mode}", *LIGHT_PRELOAD, "test_cold.py")
    term.expect("entering PDB in the cold child")
    term.expect("(Pdb) ")
    term.send("p local")
    out = term.expect("'seen in pid ")
    child_pid = int(out.split("'seen in pid ")[1].split("'")[0])
    assert child_pid != term.pid  # the cold process, not pytest's
    term.send("c")
    code = term.finish()
    text = term.seen.decode(errors="replace")
    assert code == 1, text  # one failure
    assert "1 failed, 1 passed" in text, text
    assert "cannot stop inside a cold child" not in text


def test_trace_steps_through_the_test_in_its_cold_child(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cold=FAILING)
    term = Terminal(str(pytester.path), "-p", "no:cacheprovider", "--trace",
                    "--cold-compile-mode=fork", "test_cold.py")
    term.expect("PDB runcall in the cold child")
    term.expect("(Pdb) ")
    term.send("n")  # past the assignment of local
    term.expect("(Pdb) ", timeout=30)
    term.seen = b""
    term.send("p local")
    out = term.expect("'seen in pid ")
    assert int(out.split("'seen in pid ")[1].split("'")[0]) != term.pid
    term.seen = b""
    term.send("c")
    term.expect("PDB runcall in the cold child (pid")  # test_after, traced in its own child
    term.expect("(Pdb) ")
    term.send("c")
    code = term.finish()
    assert code == 1 and "1 failed, 1 passed" in term.text(), term.text()


def test_without_a_terminal_the_failure_is_reported_and_the_reason_said(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_cold=FAILING)
    result = run(pytester, "--pdb")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines([
        "cold-compile: --pdb cannot stop inside a cold child; 1 failing cold test was reported "
        "instead; rerun without --cold-compile to debug",
        "cold-compile: --pdb is handed to the failing cold child only in fork and zygote mode, "
        "with an interactive terminal and no xdist; here: no interactive terminal",
    ])
