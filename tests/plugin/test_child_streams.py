"""Streams bound at import or collection (``from sys import stdout``, a logging handler made
in a conftest, a parameter ``sys.stdout``) are a cold child's live streams, in every capture
method and mode, and what they print shows in the test's report as it does in-process."""

from __future__ import annotations

import pytest
from coldhelp import LIGHT_PRELOAD, needs_fork, run

pytestmark = needs_fork

CONFTEST = """
import logging
import sys

# Made at import, as libraries do: it holds the stderr of that moment.
_handler = logging.StreamHandler(sys.stderr)
_handler.setFormatter(logging.Formatter("conftest-handler: %(message)s"))
logging.getLogger("bound").addHandler(_handler)
"""

TESTS = """
import logging
import sys
from sys import stderr, stdout

import pytest


def test_same_stdout_object():
    assert sys.stdout is stdout
    assert sys.stderr is stderr


def test_stream_bound_at_import_is_usable():
    stderr.write("hello\\n")


@pytest.mark.parametrize("stream", [sys.stdout], ids=["stdout"])
def test_parametrized_stream_is_live(stream):
    assert stream is sys.stdout
    stream.write("param-ok\\n")


def test_bound_streams_print_into_the_report():
    stdout.write("bound-out\\n")
    stderr.write("bound-err\\n")
    logging.getLogger("bound").warning("bound-log")
    assert False, "fails so that its captured output is reported"
"""

# Each capture method's report of the failing test, the same in-process and cold.
REPORTED = {
    "fd": ["*Captured stdout call*", "bound-out", "*Captured stderr call*", "bound-err",
           "conftest-handler: bound-log", "*Captured log call*", "*bound-log*"],
    "sys": ["*Captured stdout call*", "bound-out", "*Captured stderr call*", "bound-err",
            "conftest-handler: bound-log", "*Captured log call*", "*bound-log*"],
    "tee-sys": ["*Captured stdout call*", "bound-out", "*Captured stderr call*", "bound-err",
                "conftest-handler: bound-log", "*Captured log call*", "*bound-log*"],
}


@pytest.mark.parametrize("capture", ["fd", "sys", "no", "tee-sys"])
@pytest.mark.parametrize("mode", ["in-process", "fork", "zygote", "spawn"])
def test_streams_bound_at_import_are_the_live_ones(
    pytester: pytest.Pytester, mode: str, capture: str
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_streams=TESTS)
    cold = [] if mode == "in-process" else ["--cold-compile", f"--cold-compile-mode={mode}"]
    # Nothing here needs torch: the zygote preloads no more than it must (an empty
    # cold_compile_preload is the default, torch and triton).
    result = run(pytester, f"--capture={capture}", *LIGHT_PRELOAD, *cold)
    result.assert_outcomes(passed=3, failed=1)
    text = "\n".join(result.outlines + result.errlines)
    assert "closed file" not in text
    if capture in REPORTED:
        result.stdout.fnmatch_lines(REPORTED[capture])
    else:  # -s: nothing is captured; the bound streams wrote where the process's own write
        for line in ("hello", "param-ok", "bound-out", "bound-err", "conftest-handler: bound-log"):
            assert line in text, line
