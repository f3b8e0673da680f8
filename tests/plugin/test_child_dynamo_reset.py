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

def test_reset_in_the_body():
    torch._dynamo.reset()
    torch.compile(lambda x: x.sin() + 1, backend=BACKEND)(torch.randn(8))


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
    counters.clear()


def test_reset_in_a_fixture(fresh_dynamo):
    torch.compile(lambda x: x.cos() * 2, backend=BACKEND)(torch.randn(8))


class TestDynamoCase(TestCase):
    def test_compiles(self):
        torch.compile(lambda x: x.sin() + 1, backend=BACKEND)(torch.randn(8))
"""


# torch's TestCase derives from expecttest's, which torch's own test requirements bring; where
# it is not installed, its base class is all these tests need of it.
EXPECTTEST_STAND_IN = """
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
"""


# Inductor in one mode; the others trace through AOTAutograd alone (aot_eager), which is what
# the reset took the figures of, at a fraction of a cold C++ compile's time.
@pytest.mark.parametrize(("mode", "backend"), [("fork", "inductor"), ("zygote", "aot_eager"),
                                               ("spawn", "aot_eager")])
def test_compile_figures_survive_a_dynamo_reset(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str, backend: str
) -> None:
    monkeypatch.setenv("RESET_TEST_BACKEND", backend)
    pytester.makepyfile(test_resets=RESETTING_TESTS)
    if importlib.util.find_spec("expecttest") is None:
        pytester.makepyfile(expecttest=EXPECTTEST_STAND_IN)
    result = run(
        pytester, "--cold-compile", f"--cold-compile-mode={mode}",
        "--cold-compile-report=cold.json", timeout=900,
    )
    result.assert_outcomes(passed=3)
    entries = json.loads((pytester.path / "cold.json").read_text())
    assert len(entries) == 3
    for nodeid, entry in entries.items():
        assert entry["compile_s"] > 0, (nodeid, entry)
        assert entry["tracing_s"] > 0, (nodeid, entry)
        assert entry["frames"] >= 1, (nodeid, entry)
        if backend == "inductor":
            assert entry["inductor_s"] > 0, (nodeid, entry)
            assert entry["forward_graphs"] == 1, (nodeid, entry)


COUNTER_TESTS = """
import torch
import torch._dynamo


def shifted(x):
    return x + 1


def test_recompiles_first():
    f = torch.compile(shifted, backend="eager", dynamic=False)
    f(torch.randn(4))
    f(torch.randn(5))  # a guard failure on shifted's code


def test_counter_after_a_reset(compile_counter):
    torch._dynamo.reset()
    f = torch.compile(shifted, backend=compile_counter, dynamic=False)
    f(torch.randn(4))
    f(torch.randn(6))
    compile_counter.assert_graphs(frames=2, forward=2, backward=0)
    assert len(compile_counter.recompile_reasons) == 1, compile_counter.recompile_reasons
"""


def test_compile_counter_is_exact_across_a_reset(pytester: pytest.Pytester) -> None:
    """In-process, where an earlier test left reasons for the same code: the reset makes
    Dynamo start that code's list again, and the counter still reports the new reason."""
    pytester.makepyfile(test_counter=COUNTER_TESTS)
    result = run(pytester, timeout=900)
    result.assert_outcomes(passed=2)
