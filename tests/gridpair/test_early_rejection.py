"""A candidate over the shared-memory limit is refused at Triton's LLVM IR stage, before PTX
and ptxas, with the figures a full compile gives; compiles outside a validation, and in other
threads, are never stopped. Profile compiles: no GPU needed."""

import threading
import time

import pytest
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.runtime.errors import OutOfResources

from gridpair import devices
from gridpair.geometry import Geometry, Tile
from gridpair.signature import contiguous_signature
from gridpair.validation import _ast_source, _rejecting_past, compile_candidate

# 16 slots, two focus, one frame of 16 channels, a 32-point grid: compiles in a fraction of a
# second, and its 2-stage 32x32 forward tile needs more shared memory than its 1-stage 16x16.
GEOMETRY = Geometry(16, 2, 1, 16, 32)
SIGNATURE = contiguous_signature("fwd", GEOMETRY, torch.bfloat16, 8)
LARGE, SMALL = Tile(32, 32, 2, 4), Tile(16, 16, 1, 4)


@pytest.fixture
def stages_run(monkeypatch):
    """Names of the backend stages that ran after the LLVM IR stage, in order (every compile
    runs its stages: no Triton cache hit)."""
    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)
    ran: list[str] = []
    for stage in ("make_ptx", "make_cubin"):
        real = getattr(CUDABackend, stage)

        def spy(self, *args, _real=real, _stage=stage, **kwargs):
            ran.append(_stage)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(CUDABackend, stage, spy)
    return ran


def limits_with(shared: int) -> devices.DeviceLimits:
    return devices.DeviceLimits("profile test (sm_90)", "test", 90, shared, None)


def test_a_tile_over_the_limit_is_refused_before_ptx_with_the_full_compiles_figures(
        stages_run):
    # The oracle: both tiles compiled to the end with no limit in the way.
    unlimited = limits_with(2**31)
    large = compile_candidate("fwd", GEOMETRY, LARGE, SIGNATURE, unlimited).shared
    small = compile_candidate("fwd", GEOMETRY, SMALL, SIGNATURE, unlimited).shared
    assert small < large and stages_run == ["make_ptx", "make_cubin"] * 2
    stages_run.clear()

    limit = (small + large) // 2
    with pytest.raises(OutOfResources) as refused:
        compile_candidate("fwd", GEOMETRY, LARGE, SIGNATURE, limits_with(limit))
    assert (refused.value.required, refused.value.limit, refused.value.name) == (
        large, limit, "shared memory")
    assert stages_run == []  # no PTX, no ptxas for a refused tile

    # The one that fits still compiles to the end, to a cubin whose registers are checked.
    fits = compile_candidate("fwd", GEOMETRY, SMALL, SIGNATURE, limits_with(limit))
    assert fits.shared == small and fits.registers is not None
    assert stages_run == ["make_ptx", "make_cubin"]


def _compile_large() -> int:
    compiled = triton.compile(_ast_source("fwd", GEOMETRY, LARGE, SIGNATURE),
                              target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": LARGE.num_warps,
                                       "num_stages": LARGE.num_stages})
    return compiled.metadata.shared


def test_compiles_outside_a_validation_are_not_stopped(stages_run):
    with pytest.raises(OutOfResources):
        compile_candidate("fwd", GEOMETRY, LARGE, SIGNATURE, limits_with(1))
    # The same thread after the validation, and another thread during one, compile to the end.
    assert _compile_large() > 1
    shared_elsewhere: list[int] = []
    with _rejecting_past(1):
        worker = threading.Thread(target=lambda: shared_elsewhere.append(_compile_large()))
        worker.start()
        worker.join()
    assert shared_elsewhere and shared_elsewhere[0] > 1
    assert stages_run == ["make_ptx", "make_cubin"] * 2


def test_one_thread_at_a_time_runs_the_compiler_front_end(monkeypatch):
    """Two validations on two threads: the second enters Triton's front end (where CPython
    3.11's ast.parse is not thread-safe) only after the first has left it."""
    import triton.compiler.code_generator as code_generator

    real = code_generator.ast_to_ttir
    spans: list[tuple[str, float]] = []
    first_inside = threading.Event()

    def slow_front_end(*args, **kwargs):
        spans.append(("enter", time.perf_counter()))
        first_inside.set()
        time.sleep(0.3)  # long enough for the other thread to try to enter
        try:
            return real(*args, **kwargs)
        finally:
            spans.append(("leave", time.perf_counter()))

    monkeypatch.setattr(code_generator, "ast_to_ttir", slow_front_end)
    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)
    errors: list[BaseException] = []

    def validate(tile: Tile) -> None:
        try:
            compile_candidate("fwd", GEOMETRY, tile, SIGNATURE, limits_with(2**31))
        except BaseException as error:
            errors.append(error)

    first = threading.Thread(target=validate, args=(LARGE,))
    first.start()
    assert first_inside.wait(timeout=60)
    second = threading.Thread(target=validate, args=(SMALL,))
    second.start()
    first.join()
    second.join()
    assert errors == []
    assert [kind for kind, _ in spans] == ["enter", "leave", "enter", "leave"]


@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
def test_torch_sees_that_the_kernels_write_only_their_results(op, monkeypatch, caplog):
    """wrap_triton reads each kernel's TTIR to learn which tensors it writes; whatever it cannot
    analyse it takes for written, so a traced step copies operands that the kernel only reads.
    It calls ASTSource.make_ir by the signature it finds, through gridpair's front-end lock."""
    from torch._higher_order_ops import triton_kernel_wrap

    from gridpair.geometry import kernel_arguments, kernel_constexprs
    from gridpair.kernels import KERNELS, OPERANDS, RESULT_DTYPE_FROM
    from gridpair.launch import pad_projector
    from gridpair.validation import _install_front_end_lock

    _install_front_end_lock()

    class TargetOnly:  # the one question the analysis asks the driver, answered without a GPU
        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

    monkeypatch.setattr(triton.runtime.driver, "_active", TargetOnly())
    shape = (2, GEOMETRY.degrees, GEOMETRY.focus, GEOMETRY.channels)
    operands = [torch.zeros(shape) for _ in OPERANDS[op]]
    projector = pad_projector(torch.zeros(GEOMETRY.grid, GEOMETRY.slots))
    results = [torch.zeros(shape) for _ in RESULT_DTYPE_FROM[op]]
    n_rows = 2 * GEOMETRY.focus * GEOMETRY.channels
    kernel = KERNELS[op]
    arguments = kernel_arguments(operands, (projector, projector), results, n_rows,
                                 [x.stride() for x in operands])
    kwargs = dict(zip(kernel.arg_names, arguments))
    kwargs.update(kernel_constexprs(GEOMETRY, SMALL, torch.float32))
    first_result = len(operands) + 2
    expected = set(kernel.arg_names[first_result:first_result + len(results)])
    if hasattr(triton_kernel_wrap, "identify_accessed_tensors"):  # torch 2.12 and later
        accesses = triton_kernel_wrap.identify_accessed_tensors(kernel, kwargs, {})
        written = {dep.name for dep in accesses.read_writes.writes}
    else:
        written = set(triton_kernel_wrap.identify_mutated_tensors(kernel, kwargs, {}))
    assert "assuming every input is mutated" not in caplog.text
    assert written == expected
