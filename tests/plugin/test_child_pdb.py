"""--pdb and --trace cannot stop inside a cold child: failures are reported, the session goes
on, and the terminal says so once."""

from __future__ import annotations

import pytest
from coldhelp import LIGHT_PRELOAD, needs_fork, run

pytestmark = needs_fork

TESTS = """
import pytest

def test_fails_first():
    assert 1 == 2

def test_passes():
    pass

def test_fails_again():
    raise RuntimeError("second failure")

def test_last():
    pass
"""


@pytest.mark.parametrize("mode", ["fork", "zygote", "spawn"])
def test_pdb_reports_failures_and_the_session_goes_on(cold: pytest.Pytester, mode: str) -> None:
    cold.makepyfile(TESTS)
    result = run(cold, "--cold-compile", f"--cold-compile-mode={mode}", "--pdb", *LIGHT_PRELOAD)
    result.assert_outcomes(failed=2, passed=2)
    line = (
        "cold-compile: --pdb cannot stop inside a cold child; 2 failing cold tests were "
        "reported instead; rerun without --cold-compile to debug"
    )
    assert result.stdout.str().count(line) == 1
    result.stdout.no_fnmatch_line("*Quitting debugger*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_no_debugger_line_without_pdb(cold: pytest.Pytester) -> None:
    cold.makepyfile(TESTS)
    result = run(cold, "--cold-compile")
    result.assert_outcomes(failed=2, passed=2)
    result.stdout.no_fnmatch_line("*cannot stop inside a cold child*")
