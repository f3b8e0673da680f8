"""Cold tests report as pytest would in-process: crashes, timeouts, fixture errors, outcomes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from coldhelp import LIGHT_PRELOAD, conftest, needs_fork, run, run_inprocess, timed_out_lines

pytestmark = needs_fork

CRASHES = """
import os, signal, sys, pytest

@pytest.mark.cold_compile
def test_segfault():
    print("said before the crash")
    sys.stderr.write("complained before the crash\\n")
    os.kill(os.getpid(), signal.SIGSEGV)

@pytest.mark.cold_compile
def test_killed():
    os.kill(os.getpid(), signal.SIGKILL)

@pytest.mark.cold_compile
def test_exits():
    os._exit(3)

def test_after():
    pass
"""


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_a_crash_names_the_signal_keeps_the_output_and_the_session_goes_on(
    cold: pytest.Pytester, mode: str
) -> None:
    cold.makepyfile(CRASHES)
    result = run(cold, f"--cold-compile-mode={mode}")
    result.assert_outcomes(failed=3, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_segfault _*",
            "*.py:3: running the test CRASHED with signal 11 (SIGSEGV)",
            "*Captured stdout call*",
            "said before the crash",
            "*Captured stderr call*",
            "complained before the crash",
            "*Fatal Python error: Segmentation fault*",
            "*_ test_killed _*",
            "*CRASHED with signal 9 (SIGKILL)",
            "*_ test_exits _*",
            "*the cold child EXITED with status 3 before it reported the whole test",
        ]
    )


def test_a_timeout_kills_the_child_and_its_process_group(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        import subprocess, sys, time

        def test_hangs():
            helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            with open("helper.pid", "w") as f:
                f.write(str(helper.pid))
            print("waiting forever")
            time.sleep(120)

        def test_next():
            pass
        """
    )
    began = time.monotonic()
    result = run(cold, "--cold-compile", "--cold-compile-timeout=2")
    assert time.monotonic() - began < 60
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(timed_out_lines(2))
    helper = int((cold.path / "helper.pid").read_text())
    assert not _alive(helper), "the test's own subprocess outlived the timeout"


def _alive(pid: int) -> bool:
    """Running, not merely a zombie waiting for whoever inherited it to reap it."""
    for _ in range(50):
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.1)
    return True


@pytest.mark.parametrize(
    ("marker", "option", "ini", "wins"),
    [
        # Three different values each time: the winner's value shows in the message.
        ("timeout=1", "2", "3", "1 s (cold_compile(timeout=...)"),
        ("timeout=2", "1", "1", "2 s (cold_compile(timeout=...)"),  # even when longer
        ("", "1", "3", "1 s (--cold-compile-timeout"),
        ("", "2", "1", "2 s (--cold-compile-timeout"),  # even when longer than the ini's
        ("", None, "1", "1 s (ini cold_compile_timeout"),
    ],
)
def test_timeout_precedence_marker_then_option_then_ini(
    cold: pytest.Pytester, marker: str, option: str | None, ini: str, wins: str
) -> None:
    cold.makeini(f"[pytest]\ncold_compile_timeout = {ini}\n")
    cold.makepyfile(
        f"import pytest, time\n@pytest.mark.cold_compile({marker})\n"
        "def test_slow():\n    time.sleep(60)\n"
    )
    args = [] if option is None else [f"--cold-compile-timeout={option}"]
    result = run(cold, *args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*timeout: the cold child ran longer than {wins}*"])


FIXTURE_ERRORS = """
import pytest

@pytest.fixture
def broken_setup():
    raise RuntimeError("setup went wrong")

@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown went wrong")

@pytest.fixture(scope="module")
def module_resource():
    yield "module"

def test_setup_error(broken_setup):
    pass

def test_teardown_error(broken_teardown):
    pass

def test_failing_and_teardown_error(broken_teardown):
    assert 0

@pytest.mark.skip(reason="not today")
def test_skipped():
    pass

def test_skipped_inside():
    pytest.skip("decided inside")

@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert 0

@pytest.mark.xfail(reason="fixed already", strict=True)
def test_xpass_strict():
    pass

@pytest.mark.xfail(reason="fixed already")
def test_xpass():
    pass

def test_uses_module(module_resource):
    assert module_resource == "module"
"""


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if k not in ("warning", "warnings")}


def _outcome_lines(result: pytest.RunResult) -> list[str]:
    keep = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
    return sorted(line for line in result.stdout.lines if line.startswith(keep))


def test_fixture_errors_skips_and_xfails_match_an_in_process_run(cold: pytest.Pytester) -> None:
    cold.makepyfile(FIXTURE_ERRORS)
    plain = run_inprocess(cold, "-rA")  # no cold test: the reference, run as pytest runs it
    frozen = run(cold, "-rA", "--cold-compile")
    # In this process the plugin is imported already, which pytest warns cannot be rewritten:
    # a warning of the reference run's own, not an outcome.
    assert _outcomes(plain) == _outcomes(frozen)
    assert _outcome_lines(plain) == _outcome_lines(frozen)
    assert frozen.parseoutcomes() == {
        "failed": 2,
        "passed": 2,
        "skipped": 2,
        "xfailed": 1,
        "xpassed": 1,
        "errors": 3,
    }
    frozen.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_setup_error*",
            "*RuntimeError: setup went wrong",
            "*ERROR at teardown of test_teardown_error*",
            "*RuntimeError: teardown went wrong",
        ]
    )


def test_assertion_rewriting_output_and_properties_survive(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        import sys
        def test_fails(record_property):
            record_property("answer", 42)
            values = {"a": 1}
            print("to stdout")
            sys.stderr.write("to stderr\\n")
            assert values == {"a": 2}
        """
    )
    result = run(cold, "--cold-compile", "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E       AssertionError: assert {'a': 1} == {'a': 2}",
            "*Differing items:*",
            "*Captured stdout call*",
            "to stdout",
            "*Captured stderr call*",
            "to stderr",
        ]
    )
    junit = (cold.path / "junit.xml").read_text()
    assert '<property name="answer" value="42" />' in junit


@pytest.mark.parametrize(
    ("option", "outcome", "said"),
    [
        ("-rx", "xfailed", "*XFAIL*crashes on purpose*CRASHED with signal 6 (SIGABRT)*"),
        ("--runxfail", "failed", "*CRASHED with signal 6 (SIGABRT)*"),
    ],
)
def test_a_crash_under_xfail_is_the_expected_failure_unless_runxfail(
    cold: pytest.Pytester, option: str, outcome: str, said: str
) -> None:
    cold.makepyfile(
        """
        import os, signal, pytest
        @pytest.mark.xfail(reason="crashes on purpose")
        def test_crash():
            os.kill(os.getpid(), signal.SIGABRT)
        """
    )
    result = run(cold, "--cold-compile", option)
    result.assert_outcomes(**{outcome: 1})
    result.stdout.fnmatch_lines([said])


def test_pytest_exit_in_a_cold_test_stops_the_session(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        import pytest
        def test_stop():
            pytest.exit("enough", returncode=7)
        def test_never():
            raise AssertionError("ran after pytest.exit")
        """
    )
    result = run(cold, "--cold-compile")
    assert result.ret == 7
    result.stdout.fnmatch_lines(["*Exit: enough*"])
    result.stdout.no_fnmatch_line("*ran after pytest.exit*")


def test_warnings_of_a_cold_test_reach_the_warnings_summary(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        import warnings
        def test_warns():
            warnings.warn("careful now", DeprecationWarning)
        """
    )
    result = run(cold, "--cold-compile")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*warnings summary*", "*DeprecationWarning: careful now*"])


def test_uncaptured_output_is_echoed_with_dash_s(cold: pytest.Pytester) -> None:
    cold.makepyfile("def test_talks():\n    print('live from the child')\n")
    result = run(cold, "--cold-compile", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*live from the child*"])


def test_a_selector_failing_in_the_child_set_up_is_named_on_the_error(
    pytester: pytest.Pytester,
) -> None:
    """The child's set-up resets every selector; one that fails is the user's, not the
    plugin's: the error names it first, then shows the traceback."""
    pytester.makeconftest(
        conftest(
            """
            import pytest_coldcompile

            class Stubborn:
                name = "stubborn"
                def reset(self):
                    raise OSError("cannot forget")
                def subscribe(self, listener):
                    return lambda: None

            pytest_coldcompile.register_selector(Stubborn())
            """
        )
    )
    pytester.makepyfile("def test_any():\n    pass\n\ndef test_in_process():\n    pass\n")
    result = run(pytester, "--cold-compile")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*.py:1: launch selector 'stubborn' failed to reset: OSError: cannot forget",
            "Traceback (most recent call last):",
            "*SelectorError: launch selector 'stubborn' failed to reset: OSError: cannot forget",
        ]
    )
    assert "own machinery" not in result.stdout.str()


def test_signal_names_cover_common_crashes() -> None:
    from pytest_coldcompile.isolation.child_reports import signal_name

    assert signal_name(signal.SIGSEGV) == "SIGSEGV"
    assert signal_name(signal.SIGBUS) == "SIGBUS"
    assert signal_name(250) == "signal 250"


def test_coverage_of_a_cold_child_is_saved_despite_os_exit(cold: pytest.Pytester) -> None:
    pytest.importorskip("coverage")
    cold.makepyfile(
        covered="def in_parent():\n    return 1\n\n\ndef in_child():\n    return 2\n",
        test_cov="""
        import pytest, covered

        def test_parent():
            assert covered.in_parent() == 1

        @pytest.mark.cold_compile
        def test_child():
            assert covered.in_child() == 2
        """,
    )
    result = cold.run(
        sys.executable,
        "-m",
        "coverage",
        "run",
        "--parallel-mode",
        "--source=covered",
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "test_cov.py",
    )
    assert result.ret == 0
    assert cold.run(sys.executable, "-m", "coverage", "combine").ret == 0
    report = cold.run(sys.executable, "-m", "coverage", "report", "-m")
    report.stdout.fnmatch_lines(["covered.py * 0 * 100%"])


@pytest.mark.parametrize("mode", ["fork", "spawn", "zygote"])
def test_children_do_not_outlive_a_killed_pytest(cold: pytest.Pytester, mode: str) -> None:
    cold.makepyfile(
        """
        import os, time
        def test_hangs():
            with open("child.pid", "w") as f:
                f.write(f"{os.getpid()} {os.getppid()}")
            time.sleep(120)
        """
    )
    tmp = cold.mkdir("tmp")  # a killed pytest cannot remove its private directories
    args = ["-p", "no:cacheprovider", "--cold-compile", f"--cold-compile-mode={mode}",
            *LIGHT_PRELOAD]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args],
        cwd=cold.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    pid_file = cold.path / "child.pid"
    for _ in range(600):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    child, parent = (int(x) for x in pid_file.read_text().split())
    assert not _alive(child)
    if mode != "spawn":  # the fork server or zygote that forked it goes too
        assert not _alive(parent)
