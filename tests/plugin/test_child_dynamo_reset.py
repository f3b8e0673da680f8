"""Compile figures of a cold test that resets Dynamo (``torch._dynamo.reset()`` in the body or
a fixture, torch's own ``TestCase``, which also clears ``counters`` in set-up and tear-down)
are the real ones, and compile_counter stays exact across a reset."""

from __future__ import annotations

import importlib.util
import json

import pytest
from coldhelp import needs_fork, needs_modules, run

pytestmark = [needs_fork, needs_modules("torch")]

RESETTING_TESTS = """
import os

import pytest
import torch
import torch._dynamo
from torch._dynamo.test_case import TestCase
from torch._dynamo.utils import counters


BACKEND = os.environ["RESET_TEST_BACKEND"]
pytestmark = pytest.mark.cold_compile

# Views: Dynamo traces, AOTAutograd and Inductor compile each graph, and the figures are what
# they took, with no C++ kernel to build, which the figures' surviving a reset is not about.

def test_reset_in_the_body():
    torch._dynamo.reset()
    torch.compile(lambda x: x.view(2, 4), backend=BACKEND)(torch.randn(8))


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
    counters.clear()


def test_reset_in_a_fixture(fresh_dynamo):
    torch.compile(lambda x: x.view(4, 2), backend=BACKEND)(torch.randn(8))


class TestDynamoCase(TestCase):
    def test_compiles(self):
        torch.compile(lambda x: x.view(2, 4), backend=BACKEND)(torch.randn(8))
"""


# torch's TestCase derives from expecttest's, which torch's own test requirements bring; where
# it is not installed, its base class is all these tests need of it.
EXPECTTEST_STAND_IN = """
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
"""


# In-process, where an earlier test left reasons for the same code: the reset makes Dynamo start
# that code's list again, and compile_counter still reports the new reason.
COUNTER_TESTS = """
import torch
import torch._dynamo


# A view: Inductor compiles each graph (compile_counter counts it) without a C++ kernel to
# build, which the counts are not about.
def flattened(x):
    return x.view(-1)


def test_recompiles_first():
    f = torch.compile(flattened, backend="eager", dynamic=False)
    f(torch.randn(4))
    f(torch.randn(5))  # a guard failure on flattened's code


def test_counter_after_a_reset(compile_counter):
    torch._dynamo.reset()
    f = torch.compile(flattened, backend=compile_counter, dynamic=False)
    f(torch.randn(4))
    f(torch.randn(6))
    compile_counter.assert_graphs(frames=2, forward=2, backward=0)
    assert len(compile_counter.recompile_reasons) == 1, compile_counter.recompile_reasons
"""


# One child set-up per way a child starts: forked (fork), and re-collected (zygote; a spawned
# child re-collects with the same code, and in both the test file's imports come before the
# statistics are installed, as in a forked child). Inductor in one; the other traces through
# AOTAutograd alone (aot_eager), which is what the reset took the figures of. The zygote's
# session also runs COUNTER_TESTS in the pytest process (in any mode the same: one pytest start
# with torch serves both concerns).
@pytest.mark.parametrize(("mode", "backend"), [("fork", "inductor"), ("zygote", "aot_eager")])
def test_compile_figures_survive_a_dynamo_reset(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str, backend: str
) -> None:
    monkeypatch.setenv("RESET_TEST_BACKEND", backend)
    counter = mode == "zygote"
    pytester.makepyfile(test_resets=RESETTING_TESTS)
    if counter:
        pytester.makepyfile(test_counter=COUNTER_TESTS)
    if importlib.util.find_spec("expecttest") is None:
        pytester.makepyfile(expecttest=EXPECTTEST_STAND_IN)
    result = run(
        pytester, f"--cold-compile-mode={mode}", "--cold-compile-report=cold.json", "-v",
        timeout=900,
    )
    result.assert_outcomes(passed=5 if counter else 3)
    if counter:
        result.stdout.fnmatch_lines_random([
            "test_counter.py::test_recompiles_first PASSED*",
            "test_counter.py::test_counter_after_a_reset PASSED*",
        ])
    entries = json.loads((pytester.path / "cold.json").read_text())
    assert len(entries) == 3
    for nodeid, entry in entries.items():
        assert entry["compile_s"] > 0, (nodeid, entry)
        assert entry["tracing_s"] > 0, (nodeid, entry)
        assert entry["frames"] >= 1, (nodeid, entry)
        if backend == "inductor":
            assert entry["inductor_s"] > 0, (nodeid, entry)
            assert entry["forward_graphs"] == 1, (nodeid, entry)
