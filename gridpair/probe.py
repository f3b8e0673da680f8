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
import struct
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import triton
from torch import Tensor
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend
from triton.runtime.errors import OutOfResources
from triton.runtime.jit import MockTensor, create_function_from_signature

from gridpair.devices import MAX_THREADS_PER_BLOCK, REGISTERS_PER_BLOCK, DeviceLimits
from gridpair.geometry import Geometry, Tile, kernel_arguments, kernel_constexprs
from gridpair.kernels import KERNELS, LAUNCH_SCALARS, OPERANDS, result_dtypes

# Triton's JIT specializes an integer argument on its value's class: 1 becomes a constant, a
# multiple of 16 gets a divisibility attribute, and its type is i32 or i64 by size. Inductor
# specializes the integer arguments of a user kernel it compiles by the same rules, decided on
# the symbolic values (``torch._inductor.codegen.triton_utils.config_of``), whatever the
# kernel's do_not_specialize says. So the row count and the strides are specialized here too,
# by class: the kernel validated is then the kernel the JIT and Inductor compile.
SCALAR_ONE = "1"
# A value of each class (these are all the classes), for the validation compile's placeholders.
_PLACEHOLDER_VALUES = {SCALAR_ONE: 1, "i32:16": 16, "i32": 3, "i64:16": 2**31 + 16,
                       "i64": 2**31 + 3}

_TRITON_TYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
_WARP_SIZE = 32
_EIATTR_REGCOUNT = 0x2F
_EIFMT_SVAL = 0x04


@dataclass(frozen=True)
class Signature:
    """Everything about the operands that specializes a compile: no data, and of the row
    count and strides only their class (``scalar_class``), never their values."""

    dtype: torch.dtype  # the compute dtype: the projectors' and the dots'
    aligned: tuple[bool, ...]  # per operand: base address a multiple of 16 bytes
    wide: bool  # some reachable offset, stride or the row count needs 64 bits
    # The class of each launch scalar, in kernel order: the row count, then each operand's
    # four strides (kernels.LAUNCH_SCALARS).
    scalars: tuple[str, ...]
    # Per operand, where some operand comes in another dtype than ``dtype`` (float32 under
    # autocast); empty when every operand is in ``dtype``, so keys of one-dtype launches do not
    # depend on how they were formed. Each result takes its dtype from these
    # (``kernels.RESULT_DTYPE_FROM``): the kernels store gradients in float32 themselves.
    operand_dtypes: tuple[torch.dtype, ...] = ()
    # How such operands reach the kernel: as they are, rounded to ``dtype`` as they are loaded
    # (a launch on real tensors, eager, where a cast would cost a kernel launch), or cast to
    # ``dtype`` before the launch (a traced launch: Inductor fuses the cast into the kernel
    # that makes the operand, and the kernel reads half the bytes). False with one dtype.
    rounded_on_load: bool = False

    def dtypes(self) -> tuple[torch.dtype, ...]:
        """The dtype of each operand of the op."""
        return self.operand_dtypes or (self.dtype,) * len(self.aligned)

    def loaded_dtypes(self) -> tuple[torch.dtype, ...]:
        """The dtype of each operand as the kernel gets it."""
        return self.dtypes() if self.rounded_on_load else (self.dtype,) * len(self.aligned)


def rounds_on_load(operands: Sequence[Tensor]) -> bool:
    """Whether a launch hands these operands to the kernel in their own dtypes, to be rounded
    to the compute dtype as they are loaded (real tensors), rather than cast first (traced
    ones): ``Signature.rounded_on_load``."""
    return all(is_plain(x) for x in operands)


def mixed_dtypes(dtypes: Sequence[torch.dtype], compute: torch.dtype) -> tuple[torch.dtype, ...]:
    """``Signature.operand_dtypes`` of operands in ``dtypes`` computed in ``compute``."""
    dtypes = tuple(dtypes)
    return () if all(d == compute for d in dtypes) else dtypes


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


_PLAIN = (torch.Tensor, torch.nn.Parameter)
_INT32_MAX = 2**31 - 1


def is_plain(tensor: Tensor) -> bool:
    """A tensor with real storage: fake and functional tensors have no data pointer."""
    return type(tensor) in _PLAIN and not tensor.is_meta


def reachable_offset(tensor: Tensor) -> int | None:
    """The largest element offset a kernel forms from ``tensor``'s strides,
    sum over dims of (size - 1) * stride (0 when empty); None where a size or stride is
    symbolic."""
    # A plain loop: this runs for every operand of every eager launch.
    reach, empty = 0, False
    for size, stride in zip(tensor.shape, tensor.stride()):
        if type(size) is not int or type(stride) is not int:
            return None
        empty = empty or size == 0
        reach += (size - 1) * stride
    return 0 if empty else reach


def needs_wide_offsets(tensor: Tensor) -> bool:
    """Whether a launch on this (N, D, F, K*C) operand forms an offset past 2^31 - 1: the
    operand's reachable offset (``(D-1) * stride_d`` of a degree-major view passes it long
    before any single stride does), a stride passed as a launch scalar, or the extent of the
    contiguous results of its shape. Symbolic sizes are taken to fit 32 bits."""
    reach = reachable_offset(tensor)
    if reach is None:
        return False
    return reach > _INT32_MAX or tensor.numel() > _INT32_MAX + 1 or any(
        stride > _INT32_MAX for stride in tensor.stride())


def _layout(tensor: Tensor) -> tuple[bool, bool]:
    """(aligned, wide) of an operand as Triton specializes its launch: whether its first
    element sits on a 16-byte boundary, and whether it needs 64-bit offsets.

    Traced tensors have no address; Inductor allocates 16-byte aligned buffers and checks graph
    inputs, so their alignment is that of the storage offset (a symbolic offset counts as
    unaligned).
    """
    if is_plain(tensor):
        return tensor.data_ptr() % 16 == 0, needs_wide_offsets(tensor)
    # Imported here: it pulls in sympy (half a second), and only traced operands reach this.
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    offset = tensor.storage_offset() * tensor.element_size()
    return bool(statically_known_true(offset % 16 == 0)), needs_wide_offsets(tensor)


def scalar_class(value: object) -> str:
    """The class of an integer launch argument as Triton's JIT specializes a real one and
    Inductor a symbolic one: ``"1"``, or ``"i32"`` / ``"i64"`` by size with ``":16"`` for a
    multiple of 16. A symbolic value is 1 or a multiple of 16 only where that is statically
    known, and its width is its hint's (as Inductor decides both)."""
    if type(value) is int:
        if value == 1:
            return SCALAR_ONE
        width = "i32" if -(2**31) <= value <= _INT32_MAX else "i64"
        return f"{width}:16" if value % 16 == 0 else width
    # Imported here: it pulls in sympy (half a second), and only traced launches reach this.
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    if statically_known_true(value == 1):
        return SCALAR_ONE
    hint = getattr(getattr(value, "node", None), "hint", None)
    width = "i64" if isinstance(hint, int) and hint > _INT32_MAX else "i32"
    return f"{width}:16" if statically_known_true(value % 16 == 0) else width


def signature_of(operands: Sequence[Tensor], geometry: Geometry,
                 dtype: torch.dtype | None = None) -> Signature:
    """The Signature of a launch on these operands (real, fake or functional) computed in
    ``dtype`` (the projectors' dtype; by default the first operand's)."""
    compute = operands[0].dtype if dtype is None else dtype
    if rounds_on_load(operands):
        return _plain_signature(operands, geometry, compute)
    aligned, wide = [], False
    scalars = [operands[0].shape[0] * geometry.focus * geometry.channels]
    for x in operands:
        if x.dtype == compute:
            x_aligned, x_wide = _layout(x)
            scalars.extend(x.stride())
        else:  # cast before the launch to a fresh contiguous tensor (``launch.launch``)
            x_aligned, x_wide = True, needs_wide_offsets(x)
            scalars.extend(contiguous_strides(geometry))
        aligned.append(x_aligned)
        wide = wide or x_wide
    return Signature(compute, tuple(aligned), wide, tuple(scalar_class(v) for v in scalars),
                     mixed_dtypes([x.dtype for x in operands], compute))


# (shape, strides) of a real operand -> (needs wide offsets, its strides' classes): the same
# few layouts come back on every eager launch, and this is asked before each.
_LAYOUT_CLASSES: dict[tuple, tuple[bool, tuple[str, ...]]] = {}


def _plain_signature(operands: Sequence[Tensor], geometry: Geometry,
                     compute: torch.dtype) -> Signature:
    """``signature_of`` for tensors with real storage, each layout's part looked up once."""
    aligned, wide, classes = [], False, [
        scalar_class(operands[0].shape[0] * geometry.focus * geometry.channels)]
    for x in operands:
        layout = (x.shape, x.stride())
        known = _LAYOUT_CLASSES.get(layout)
        if known is None:
            if len(_LAYOUT_CLASSES) >= 4096:
                _LAYOUT_CLASSES.clear()
            known = (needs_wide_offsets(x), tuple(scalar_class(v) for v in layout[1]))
            _LAYOUT_CLASSES[layout] = known
        aligned.append(x.data_ptr() % 16 == 0)
        wide = wide or known[0]
        classes.extend(known[1])
    mixed = mixed_dtypes([x.dtype for x in operands], compute)
    return Signature(compute, tuple(aligned), wide, tuple(classes), mixed, bool(mixed))


def contiguous_signature(op: str, geometry: Geometry, dtype: torch.dtype,
                         nodes: int) -> Signature:
    """The Signature of a launch on fresh contiguous operands of ``nodes`` nodes."""
    n_operands = len(OPERANDS[op])
    strides = contiguous_strides(geometry)
    scalars = [nodes * geometry.focus * geometry.channels, *strides * n_operands]
    return Signature(dtype, (True,) * n_operands, nodes * strides[0] > _INT32_MAX + 1,
                     tuple(scalar_class(v) for v in scalars))


def contiguous_strides(geometry: Geometry) -> tuple[int, int, int, int]:
    """Strides of a contiguous (N, D, F, K*C) operand, as the kernels' results are."""
    packed = geometry.frames * geometry.channels
    return (geometry.degrees * geometry.focus * packed, geometry.focus * packed, packed, 1)


def _placeholder_arguments(op: str, signature: Signature) -> list[object]:
    if len(signature.scalars) != len(LAUNCH_SCALARS[op]):
        raise ValueError(f"{op}: a signature of {len(signature.scalars)} launch scalars, "
                         f"expected {len(LAUNCH_SCALARS[op])} ({', '.join(LAUNCH_SCALARS[op])})")
    operands = [_Operand(dtype, aligned)
                for dtype, aligned in zip(signature.loaded_dtypes(), signature.aligned)]
    # Padded projectors and results are fresh allocations: always aligned.
    projectors = [_Operand(signature.dtype, True) for _ in range(2)]
    results = [_Operand(dtype, True)
               for dtype in result_dtypes(op, signature.dtypes(), signature.dtype)]
    n_rows, *strides = (_PLACEHOLDER_VALUES[c] for c in signature.scalars)
    return kernel_arguments(operands, projectors, results, n_rows,
                            [strides[i:i + 4] for i in range(0, len(strides), 4)])


_validation = threading.local()


def _install_early_rejection() -> None:
    """Make the CUDA backend's LLVM IR stage stop a validation compile whose shared memory is
    over the limit being validated (``_rejecting_past``); other compiles are untouched.

    Triton fixes a kernel's shared memory (``metadata["shared"]``, what loading it checks) in
    that stage; PTX generation and ptxas after it took 55-60% of a P147 candidate's compile
    (profile h200, this CPU: 0.84 of 1.52 s for the bf16 forward), all of it wasted on a tile
    that is then refused. Wrapping the stage keeps Triton's cache keys: its supported stage
    hook (``knobs.runtime.add_stages_inspection_hook``) would add a key to every kernel's JIT
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


def max_threads(registers_per_thread: int) -> int:
    """Threads per block a kernel can launch with, as the driver computes it from registers.

    Registers are allocated per warp in units of 256 (8 per thread, rounded up).
    """
    per_warp = -(-registers_per_thread * _WARP_SIZE // 256) * 256
    warps = REGISTERS_PER_BLOCK // max(per_warp, 1)
    return min(MAX_THREADS_PER_BLOCK, warps * _WARP_SIZE)


def cubin_registers(cubin: bytes) -> int | None:
    """Registers per thread from a cubin's ``.nv.info`` REGCOUNT attribute (None if absent)."""
    if cubin[:4] != b"\x7fELF":
        return None
    for data in _elf_sections(cubin, prefix=".nv.info"):
        offset = 0
        while offset + 4 <= len(data):
            fmt, attribute, value = struct.unpack_from("<BBH", data, offset)
            if fmt == _EIFMT_SVAL:
                if attribute == _EIATTR_REGCOUNT:
                    return struct.unpack_from("<II", data, offset + 4)[1]
                offset += 4 + value
            else:
                offset += 4
    return None


def _elf_sections(elf: bytes, prefix: str) -> Sequence[bytes]:
    (section_table,) = struct.unpack_from("<Q", elf, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, section_table + i * entry_size)
               for i in range(count)]
    names_offset = headers[names_index][4]
    found = []
    for header in headers:
        start = names_offset + header[0]
        name = elf[start:elf.index(b"\0", start)].decode()
        if name.startswith(prefix):
            found.append(elf[header[4]:header[4] + header[5]])
    return found
