"""A kernel that faults the CUDA context: in-process every later CUDA test of the session fails
with it (the error is sticky), cold only the faulting test fails (skipped without a GPU)."""

from __future__ import annotations

import re

import pytest
from coldhelp import needs_fork, run

pytestmark = needs_fork

FAULTING_MODULE = """
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def _wild_store(ptr):
    tl.store(ptr + (1 << 40), 1.0)  # a terabyte past the allocation: no memory there


def test_a_kernel_faults():
    x = torch.zeros(1, device="cuda")
    _wild_store[(1,)](x)
    torch.cuda.synchronize()


@pytest.mark.parametrize("n", [1, 2, 3])
def test_later_cuda_work(n):
    assert torch.ones(n, device="cuda").sum().item() == n
"""

# torch 2.11 raises torch.AcceleratorError, earlier ones RuntimeError; the message names the
# fault (an unmapped store reads as an illegal memory access; "unspecified launch failure" too).
FAULT = re.compile(r"illegal memory access|illegal address|unspecified launch failure")
# -vv: the short summary's lines whole, not cut to the terminal's width.
ARGS = ("-p", "no:randomly", "-rf", "-vv")


def _failed_with_the_fault(result: pytest.RunResult) -> list[str]:
    """The tests whose short-summary line names the fault."""
    return sorted(
        line.split()[1].split("::")[1]
        for line in result.outlines
        if line.startswith("FAILED test_fault.py::") and FAULT.search(line)
    )


@pytest.mark.requires_cuda
def test_a_faulting_kernel_fails_alone_when_cold(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fault=FAULTING_MODULE)
    warm = run(pytester, *ARGS)
    warm.assert_outcomes(failed=4)
    assert _failed_with_the_fault(warm) == [
        "test_a_kernel_faults", *(f"test_later_cuda_work[{n}]" for n in (1, 2, 3))
    ], warm.stdout.str()
    cold = run(pytester, *ARGS, "--cold-compile")
    cold.assert_outcomes(passed=3, failed=1)
    assert _failed_with_the_fault(cold) == ["test_a_kernel_faults"], cold.stdout.str()
