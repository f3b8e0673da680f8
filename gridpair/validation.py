"""Validation of one launch candidate by compiling it, never by running it.

On a GPU the candidate is compiled through the kernel's own JIT (``warmup`` with dtype
placeholders, the same specialization the launch will compute, so the launch reuses it) and its
handles are loaded, letting Triton's own ``OutOfResources`` enforce shared memory, threads and
registers. With no GPU it is compiled for a profile's architecture and the profile's limits are
applied, raising the same ``OutOfResources``. Any other compiler error propagates.

A candidate over the shared-memory limit is rejected as soon as the compiler knows its footprint
(see ``_rejecting_past``), rather than after PTX and ptxas.
"""

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend
from triton.runtime.errors import OutOfResources
from triton.runtime.jit import MockTensor, create_function_from_signature

from gridpair.cubin import cubin_registers
from gridpair.devices import MAX_THREADS_PER_BLOCK, REGISTERS_PER_BLOCK, DeviceLimits
from gridpair.geometry import (
    LAUNCH_SCALARS,
    Geometry,
    Tile,
    kernel_arguments,
    kernel_constexprs,
    result_dtypes,
)
from gridpair.kernels import KERNELS
from gridpair.signature import SCALAR_ONE, LaunchKey, Signature

# A value of each class (these are all the classes), for the validation compile's placeholders.
_PLACEHOLDER_VALUES = {SCALAR_ONE: 1, "i32:16": 16, "i32": 3, "i64:16": 2**31 + 16,
                       "i64": 2**31 + 3}

_TRITON_TYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
_WARP_SIZE = 32


@dataclass(frozen=True)
class Compiled:
    """A candidate that compiled: its footprint as Triton reports it."""

    shared: int
    registers: int | None


class _Operand(MockTensor):
    """A dtype-only operand whose address is aligned or not, as the real one will be."""

    def __init__(self, dtype: torch.dtype, aligned: bool) -> None:
        super().__init__(dtype)
        self._address = 0 if aligned else 4

    def data_ptr(self) -> int:
        return self._address


def _placeholder_arguments(op: str, signature: Signature) -> list[object]:
    if len(signature.scalars) != len(LAUNCH_SCALARS[op]):
        raise ValueError(f"{op}: a signature of {len(signature.scalars)} launch scalars, "
                         f"expected {len(LAUNCH_SCALARS[op])} ({', '.join(LAUNCH_SCALARS[op])})")
    operands = [_Operand(dtype, aligned)
                for dtype, aligned in zip(signature.loaded_dtype_per_operand, signature.aligned)]
    # Padded projectors and results are fresh allocations: always aligned.
    projectors = [_Operand(signature.dtype, True) for _ in range(2)]
    results = [_Operand(dtype, True)
               for dtype in result_dtypes(op, signature.dtype_per_operand, signature.dtype)]
    n_rows, *strides = (_PLACEHOLDER_VALUES[c] for c in signature.scalars)
    return kernel_arguments(operands, projectors, results, n_rows,
                            [strides[i:i + 4] for i in range(0, len(strides), 4)])


_validation = threading.local()


def _install_early_rejection() -> None:
    """Make the CUDA backend's LLVM IR stage stop a validation compile whose shared memory is
    over the limit being validated (``_rejecting_past``); other compiles are untouched.

    Triton fixes a kernel's shared memory (``metadata["shared"]``, what loading it checks) in that
    stage; PTX generation and ptxas after it are more than half of a candidate's compile
    (docs/design-gridpair.md), all of it wasted on a tile that is then refused. Wrapping the stage
    keeps Triton's cache keys: its supported stage hook
    (``knobs.runtime.add_stages_inspection_hook``) would add a key to every kernel's JIT
    specialization, so a launch made without it would compile the kernel a second time.
    """
    from triton.backends.nvidia.compiler import CUDABackend

    make_llir = CUDABackend.make_llir
    if getattr(make_llir, "_gridpair_early_rejection", False):
        return

    @functools.wraps(make_llir)
    def make_llir_rejecting_past_limit(self, src, metadata, *args, **kwargs):
        llir = make_llir(self, src, metadata, *args, **kwargs)
        limit = getattr(_validation, "shared_limit", None)
        shared = metadata.get("shared")
        if limit is not None and shared is not None and shared > limit:
            raise OutOfResources(shared, limit, "shared memory")
        return llir

    make_llir_rejecting_past_limit._gridpair_early_rejection = True  # type: ignore[attr-defined]
    CUDABackend.make_llir = make_llir_rejecting_past_limit


_FRONT_END = threading.RLock()


def _install_front_end_lock() -> None:
    """Let one thread at a time run Triton's front end (Python AST to TTIR), in every compile.

    Validation compiles on worker threads, and CPython 3.11's ``ast.parse``, which the front
    end calls for the kernel and each helper it calls, is not safe across threads: its
    recursion-depth check is interpreter-wide, and a thread switch during the conversion raises
    ``SystemError: AST constructor recursion depth mismatch`` (seen on this CPU with two
    workers). The front end holds the GIL throughout, so taking it in turn costs next to
    nothing; the MLIR passes, LLVM and ptxas after it still run side by side.
    """
    make_ir = ASTSource.make_ir
    if getattr(make_ir, "_gridpair_front_end_lock", False):
        return

    # wraps: torch's wrap_triton reads make_ir's signature to call it (its argument list
    # changed across Triton versions); a bare (*args) made it pick the wrong call, fail, and
    # take every operand of our kernels for written (test_early_rejection.py).
    @functools.wraps(make_ir)
    def make_ir_one_thread_at_a_time(self, *args, **kwargs):
        with _FRONT_END:
            return make_ir(self, *args, **kwargs)

    make_ir_one_thread_at_a_time._gridpair_front_end_lock = True  # type: ignore[attr-defined]
    ASTSource.make_ir = make_ir_one_thread_at_a_time


@contextmanager
def _rejecting_past(shared_limit: int) -> Iterator[None]:
    """Compiles in this thread, for the block, stop with ``OutOfResources`` once their shared
    memory is known to exceed ``shared_limit`` (the same verdict and figures as after a full
    compile; nothing is cached for a refused kernel). Installs the front-end lock too: every
    validation compile passes here, whatever thread it runs on."""
    _install_early_rejection()
    _install_front_end_lock()
    outer = getattr(_validation, "shared_limit", None)
    _validation.shared_limit = shared_limit
    try:
        yield
    finally:
        _validation.shared_limit = outer


def compile_on_device(op: str, geometry: Geometry, tile: Tile, signature: Signature,
                      limits: DeviceLimits) -> Compiled:
    """Compile through the JIT for the real device and load the handles (nothing runs)."""
    kernel = KERNELS[op]
    with torch.cuda.device(limits.index), _rejecting_past(limits.shared):
        compiled = kernel.warmup(
            *_placeholder_arguments(op, signature), grid=(1,),
            **kernel_constexprs(geometry, tile, signature.dtype, signature.wide),
            num_warps=tile.num_warps, num_stages=tile.num_stages,
        )
        compiled._init_handles()
    shared = compiled.metadata.shared
    # Triton checks its own (possibly emulated) device limit; the effective limit may be lower.
    if shared > limits.shared:
        raise OutOfResources(shared, limits.shared, "shared memory")
    return Compiled(shared, getattr(compiled, "n_regs", None))


def _ast_source(op: str, geometry: Geometry, tile: Tile, signature: Signature,
                arch: int = 90) -> ASTSource:
    """The source the JIT builds for this launch, made by the JIT's own binder and packer from
    the same placeholders, so a profile compile is the specialization a launch compiles on the
    installed Triton (3.6 gives constexprs no attribute entry, 3.7 an empty one)."""
    kernel = KERNELS[op]
    backend = make_backend(GPUTarget("cuda", arch, _WARP_SIZE))
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    kwargs = dict(kernel_constexprs(geometry, tile, signature.dtype, signature.wide),
                  num_warps=tile.num_warps, num_stages=tile.num_stages, debug=False)
    bound, specialization, options = binder(*_placeholder_arguments(op, signature), **kwargs)
    _, types, constexprs, attrs = kernel._pack_args(backend, kwargs, bound, specialization,
                                                    options)
    return ASTSource(kernel, types, constexprs, attrs)


def compile_for_profile(op: str, geometry: Geometry, tile: Tile, signature: Signature,
                        limits: DeviceLimits) -> Compiled:
    """Compile for the profile's architecture and apply its limits."""
    with _rejecting_past(limits.shared):
        compiled = triton.compile(
            _ast_source(op, geometry, tile, signature, limits.arch),
            target=GPUTarget("cuda", limits.arch, _WARP_SIZE),
            options={"num_warps": tile.num_warps, "num_stages": tile.num_stages},
        )
    shared = compiled.metadata.shared
    if shared > limits.shared:
        raise OutOfResources(shared, limits.shared, "shared memory")
    registers = cubin_registers(compiled.kernel)
    threads = tile.num_warps * _WARP_SIZE
    if registers is not None and threads > max_threads(registers):
        raise OutOfResources(threads, max_threads(registers), "threads")
    return Compiled(shared, registers)


def compile_candidate(op: str, geometry: Geometry, tile: Tile, signature: Signature,
                      limits: DeviceLimits) -> Compiled:
    """Compile ``tile`` for ``limits``; raise OutOfResources if it cannot be loaded there."""
    for dtype in (signature.dtype, *signature.operand_dtypes):
        if dtype not in _TRITON_TYPES:
            raise TypeError(f"no fused kernel for dtype {dtype}")
    if limits.physical:
        return compile_on_device(op, geometry, tile, signature, limits)
    return compile_for_profile(op, geometry, tile, signature, limits)


def validate(key: LaunchKey, tile: Tile, limits: DeviceLimits) -> Compiled:
    """Compile ``key``'s launch with ``tile`` for ``limits``; OutOfResources if the device
    cannot load it. What ``LaunchSelector.validate`` does unless a subclass overrides it."""
    return compile_candidate(key.op, key.geometry, tile, key.signature, limits)


def max_threads(registers_per_thread: int) -> int:
    """Threads per block a kernel can launch with, as the driver computes it from registers.

    Registers are allocated per warp in units of 256 (8 per thread, rounded up).
    """
    per_warp = -(-registers_per_thread * _WARP_SIZE // 256) * 256
    warps = REGISTERS_PER_BLOCK // max(per_warp, 1)
    return min(MAX_THREADS_PER_BLOCK, warps * _WARP_SIZE)
