"""The proof that the cold regressions catch the bug they guard (GPU only).

On a device emulating 101376 bytes of shared memory per block:
(a) with validation switched off - a selector that trusts a successful trace, as the old retry
    loop did - the cold compiled step fails with Triton's OutOfResources;
(b) the same selector passes in a plain in-process run where an eager step ran first (its
    retry loop learned a tile that fits, and the compiled step reuses it): the masking that
    pytest-coldcompile exists to defeat;
(c) with the validated selector the cold step passes and every admitted launch fits
    (test_cold_force_loss.py run with --smem-limit 101376: it asserts shared <= limit for
    every admitted launch).
"""

import os
from pathlib import Path

import pytest
import torch
from force_step import Case, compile_step, operands
from trusting import TrustingSelector

from gridpair.selector import using_selector

HERE = Path(__file__).parent
LIMIT = 101376


def _chain(error: BaseException) -> str:
    text = []
    while error is not None:
        text.append(f"{type(error).__name__}: {error}")
        error = error.__cause__ or error.__context__
    return "\n".join(text)


def _run_and_wait(compiled, example):
    compiled(*example)  # Inductor compiles and loads the recorded kernels here
    torch.cuda.synchronize()


@pytest.mark.cold_compile
@pytest.mark.requires_cuda
@pytest.mark.smem_limit(LIMIT)
@pytest.mark.parametrize("precision", ["float32", "bf16-amp"])
def test_a_unvalidated_selector_fails_cold_with_out_of_resources(precision, compile_counter):
    trusting = TrustingSelector()
    admitted = []
    trusting.subscribe(lambda e: admitted.append(e) if e.kind == "admit" else None)
    case = Case("multi-focus", precision, "cuda")
    example = operands(case, 300, seed=0)
    with using_selector(trusting):
        compiled, _ = compile_step(case, compile_counter, example)  # traced: nothing loaded
        with pytest.raises(Exception) as failure:
            _run_and_wait(compiled, example)
    chain = _chain(failure.value)
    assert "out of resource: shared memory" in chain, chain
    assert f"Hardware limit: {LIMIT}" in chain, chain
    assert admitted, "the trusting selector admitted nothing: the failure is not its"


INNER = """
import pytest
import torch
from force_step import Case, compile_step, make_step, operands
from trusting import TrustingSelector

from gridpair.selector import using_selector

TRUSTING = TrustingSelector()
CASE = Case("multi-focus", "{precision}", "cuda")


def contiguous_operands(nodes, seed):
    # Contiguous operands: eager and traced launches then share one selector key (a traced
    # view's storage offset is symbolic, which the selector keys as possibly unaligned).
    return [x.contiguous() for x in operands(CASE, nodes, seed)]


@pytest.mark.smem_limit({limit})
def test_1_eager_step_first():
    with using_selector(TRUSTING), CASE.autocast():
        make_step(3)(*contiguous_operands(128, seed=0))
    torch.cuda.synchronize()


@pytest.mark.smem_limit({limit})
def test_2_compiled_step():
    example = contiguous_operands(300, seed=1)
    with using_selector(TRUSTING):
        compiled, _ = compile_step(CASE, "inductor", example)
        compiled(*example)
    torch.cuda.synchronize()

"""


@pytest.mark.requires_cuda
@pytest.mark.parametrize("precision", ["float32"])
def test_b_c_warm_in_process_run_masks_what_the_cold_run_catches(pytester, monkeypatch,
                                                                 precision):
    # The inner run imports the regression helpers and, through them, the numerics helpers.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(HERE), str(HERE.parent / "gridpair"),
         *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))
    pytester.makepyfile(test_inner=INNER.format(precision=precision, limit=LIMIT))

    warm = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", timeout=400)
    print(warm.stdout.str()[-3000:])
    warm.assert_outcomes(passed=2)  # (b): in-process, the eager step masked the bug

    cold = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", "--cold-compile",
                                         timeout=400)
    print(cold.stdout.str()[-6000:])
    cold.assert_outcomes(passed=1, failed=1)  # the same two tests, cold: (a) again
    cold.stdout.fnmatch_lines(["*FAILED*test_2_compiled_step*"])
    assert "out of resource: shared memory" in cold.stdout.str()
    # (c), the validated selector passing cold under the same limit with every admitted launch
    # within it, is test_cold_force_loss.py under --smem-limit 101376.
