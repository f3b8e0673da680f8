"""pytest-timeout and other exceptions raised in the pytest process while a cold child runs.

pytest-timeout is active in the cold child as in the parent: its timer fires in the child,
inside the test, whatever its method; the parent kills the child and carries on otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest
from coldhelp import LIGHT_PRELOAD, needs_fork, run

pytestmark = needs_fork

needs_timeout_plugin = pytest.mark.skipif(
    importlib.util.find_spec("pytest_timeout") is None, reason="needs pytest-timeout"
)

HANGS_UNMARKED = """
import os, time, pytest

@pytest.mark.cold_compile
def test_hangs():
    # Whole or not at all: the parent's ALARM interrupts as soon as child.pid exists.
    with open("child.pid.tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace("child.pid.tmp", "child.pid")
    time.sleep(120)

def test_next():
    pass
"""
# pytest-timeout's timer starts in the child, at the test: no child start-up inside its 1 s.
HANGS = HANGS_UNMARKED.replace(
    "@pytest.mark.cold_compile\n", "@pytest.mark.cold_compile\n@pytest.mark.timeout(1)\n"
)


def child_gone(path: Path) -> bool:
    pid = int(path.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state == "Z"


@needs_timeout_plugin
@pytest.mark.parametrize("method", ["signal", "thread"])
@pytest.mark.parametrize("mode", ["fork", "spawn", "zygote"])
def test_a_pytest_timeout_fails_the_cold_test_and_the_session_goes_on(
    cold: pytest.Pytester, mode: str, method: str
) -> None:
    cold.makepyfile(HANGS)
    began = time.monotonic()
    result = run(cold, "-p", "timeout", f"--timeout-method={method}", f"--cold-compile-mode={mode}",
                 *LIGHT_PRELOAD)
    assert time.monotonic() - began < 60
    result.assert_outcomes(failed=1, passed=1)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*_ test_hangs _*", "*Timeout*"])
    if method == "thread":  # the child exits: the headline says who ended it
        result.stdout.fnmatch_lines(["*EXITED*(pytest-timeout's thread method ended it: Timeout)"])
    assert child_gone(cold.path / "child.pid")


ALARM = """
import os, signal, pytest

PARENT = os.environ.setdefault("ALARM_PARENT_PID", str(os.getpid()))

@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item):
    # Only in the pytest process: a cold child runs this hook too.
    armed = str(os.getpid()) == PARENT and item.name == "test_hangs"
    if armed:
        def ring(signum, frame):
            if not os.path.exists("child.pid"):  # not in the test body yet: ring again
                signal.setitimer(signal.ITIMER_REAL, 0.2)
                return
            raise {exception}
        signal.signal(signal.SIGALRM, ring)
        signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        return (yield)
    finally:
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
"""



def _interrupt_the_parent(
    cold: pytest.Pytester, mode: str, exception: str
) -> pytest.RunResult:
    """Run HANGS_UNMARKED cold with ALARM raising ``exception`` in the pytest process."""
    cold.makeconftest((cold.path / "conftest.py").read_text() + ALARM.format(exception=exception))
    cold.makepyfile(HANGS_UNMARKED)
    began = time.monotonic()
    result = run(cold, f"--cold-compile-mode={mode}", *LIGHT_PRELOAD)
    assert time.monotonic() - began < 60
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    return result


@pytest.mark.parametrize("mode", ["fork", "spawn", "zygote"])
def test_a_base_exception_in_the_parent_kills_the_child_and_fails_the_test(
    cold: pytest.Pytester, mode: str
) -> None:
    result = _interrupt_the_parent(cold, mode, 'pytest.fail("the parent was interrupted")')
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_hangs _*",
            "*.py:3: Failed: the parent was interrupted",
            "*process group was killed*",
        ]
    )
    assert child_gone(cold.path / "child.pid")


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        ("KeyboardInterrupt", "*KeyboardInterrupt*"),
        ('pytest.exit("stopped by the parent")', "*Exit: stopped by the parent*"),
    ],
    ids=["keyboard-interrupt", "pytest-exit"],
)
@pytest.mark.parametrize("mode", ["fork", "spawn", "zygote"])
def test_an_interrupt_in_the_parent_kills_the_child_and_stops_the_session(
    cold: pytest.Pytester, mode: str, raised: str, said: str
) -> None:
    result = _interrupt_the_parent(cold, mode, raised)
    result.stdout.fnmatch_lines([said])
    result.stdout.no_fnmatch_line("*passed*")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert child_gone(cold.path / "child.pid")


BLOCKS_ALARM = """
import os, signal, time, pytest

@pytest.mark.cold_compile
@pytest.mark.timeout(1)
def test_deaf():
    # As a test stuck in C code: pytest-timeout's SIGALRM never reaches Python.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    with open("child.pid", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)

def test_next():
    pass
"""


@needs_timeout_plugin
@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_the_parent_kills_a_child_whose_pytest_timeout_cannot_fire(
    cold: pytest.Pytester, mode: str
) -> None:
    cold.makeconftest(
        (cold.path / "conftest.py").read_text()
        + "\nimport pytest_coldcompile.interop as interop\n"
        + "interop.TIMEOUT_PLUGIN_ALLOWANCE = 2\n"
    )
    cold.makepyfile(BLOCKS_ALARM)
    began = time.monotonic()
    result = run(cold, "-p", "timeout", "--timeout-method=signal", f"--cold-compile-mode={mode}")
    assert time.monotonic() - began < 60
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["*timeout: the cold child ran longer than 3 s (pytest-timeout's 1 s*plus 2 s)*"]
    )
    assert child_gone(cold.path / "child.pid")
