"""The launch signature: what about the operands specializes a kernel's compile (dtypes,
alignment, the classes of the row count and strides, never data), and the key a launch
decision is cached under. Works alike on real, fake and functional tensors.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gridpair.devices import DeviceLimits
from gridpair.geometry import OPERANDS, Geometry
from gridpair.tracing import is_plain, rounds_on_load

# Triton's JIT specializes an integer argument on its value's class: 1 becomes a constant, a
# multiple of 16 gets a divisibility attribute, and its type is i32 or i64 by size. Inductor
# specializes the integer arguments of a user kernel it compiles by the same rules, decided on
# the symbolic values (``torch._inductor.codegen.triton_utils.config_of``), whatever the
# kernel's do_not_specialize says. So the row count and the strides are specialized here too,
# by class: the kernel validated is then the kernel the JIT and Inductor compile.
SCALAR_ONE = "1"


@dataclass(frozen=True)
class Signature:
    """Everything about the operands that specializes a compile: no data, and of the row
    count and strides only their class (``scalar_class``), never their values."""

    dtype: torch.dtype  # the compute dtype: the projectors' and the dots'
    aligned: tuple[bool, ...]  # per operand: base address a multiple of 16 bytes
    wide: bool  # some reachable offset, stride or the row count needs 64 bits
    # The class of each launch scalar, in kernel order: the row count, then each operand's
    # four strides (geometry.LAUNCH_SCALARS).
    scalars: tuple[str, ...]
    # Per operand, where some operand comes in another dtype than ``dtype`` (float32 under
    # autocast); empty when every operand is in ``dtype``, so keys of one-dtype launches do not
    # depend on how they were formed. Each result takes its dtype from these
    # (``geometry.RESULT_DTYPE_FROM``): the kernels store gradients in float32 themselves.
    operand_dtypes: tuple[torch.dtype, ...] = ()
    # How such operands reach the kernel: as they are, rounded to ``dtype`` as they are loaded
    # (a launch on real tensors, eager, where a cast would cost a kernel launch), or cast to
    # ``dtype`` before the launch (a traced launch: Inductor fuses the cast into the kernel
    # that makes the operand, and the kernel reads half the bytes). False with one dtype.
    rounded_on_load: bool = False
    # Derived as the signature is made, not part of what identifies it: the dtype of each
    # operand, and of each operand as the kernel gets it. The layers below (validation, the
    # launch) read them as they read the rest of the signature, without calling back into it.
    dtype_per_operand: tuple[torch.dtype, ...] = field(init=False, repr=False, compare=False)
    loaded_dtype_per_operand: tuple[torch.dtype, ...] = field(init=False, repr=False,
                                                              compare=False)

    def __post_init__(self) -> None:
        given = self.operand_dtypes or (self.dtype,) * len(self.aligned)
        loaded = given if self.rounded_on_load else (self.dtype,) * len(self.aligned)
        object.__setattr__(self, "dtype_per_operand", given)
        object.__setattr__(self, "loaded_dtype_per_operand", loaded)

    def dtypes(self) -> tuple[torch.dtype, ...]:
        """The dtype of each operand of the op (``dtype_per_operand``)."""
        return self.dtype_per_operand

    def loaded_dtypes(self) -> tuple[torch.dtype, ...]:
        """The dtype of each operand as the kernel gets it (``loaded_dtype_per_operand``)."""
        return self.loaded_dtype_per_operand


def mixed_dtypes(dtypes: Sequence[torch.dtype], compute: torch.dtype) -> tuple[torch.dtype, ...]:
    """``Signature.operand_dtypes`` of operands in ``dtypes`` computed in ``compute``."""
    dtypes = tuple(dtypes)
    return () if all(d == compute for d in dtypes) else dtypes


_INT32_MAX = 2**31 - 1


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


def scalar_class(value: Any) -> str:
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


@dataclass(frozen=True)
class LaunchKey:
    """Everything a choice depends on: of the pair count and strides only their classes (in
    the signature), never their values."""

    op: str
    device: str
    limit: int
    geometry: Geometry
    signature: Signature


def launch_key(op: str, operands: Sequence[Tensor], projectors: Sequence[Tensor],
               n_frames: int, limits: DeviceLimits) -> LaunchKey:
    """The key of a launch of ``op`` on these operands for ``limits``."""
    geometry = Geometry.of(operands[0], projectors[0], n_frames)
    return LaunchKey(op, limits.identity, limits.shared, geometry,
                     signature_of(operands, geometry, projectors[0].dtype))


# The ops whose keys are validated ahead once one of them is decided, and where each takes the
# (grad_out, left, right) operands' alignment and strides from: the backward's grad_out and
# second-order tangents are fresh allocations; left and right are the forward's operands.
_SIBLINGS = ("fwd", "bwd", "bwd2")
_COMMON_OPERANDS = {"fwd": (None, 0, 1), "bwd": (0, 1, 2), "bwd2": (0, 1, 2)}


def sibling_keys(key: LaunchKey) -> list[LaunchKey]:
    """The keys of the other orders of the same launch: same device, limit, geometry,
    compute dtype, width, row count and way of reading other dtypes
    (``Signature.rounded_on_load``); (grad_out, left, right) aligned and strided as in
    ``key``, the rest fresh contiguous allocations. grad_out comes in the compute dtype (the
    forward's result's) unless ``key`` says otherwise, left and right in theirs, and each
    grad-grad in the dtype of the operand it is the cotangent of the gradient of."""
    signature = key.signature
    dtypes = signature.dtype_per_operand
    fresh = (True, tuple(scalar_class(s) for s in contiguous_strides(key.geometry)))
    common = [fresh, fresh, fresh]
    common_dtypes = [signature.dtype, signature.dtype, signature.dtype]
    for position, index in enumerate(_COMMON_OPERANDS.get(key.op, ())):
        if index is not None and index < len(signature.aligned):
            common[position] = (signature.aligned[index],
                                signature.scalars[1 + 4 * index:5 + 4 * index])
            common_dtypes[position] = dtypes[index]
    go, left, right = common_dtypes
    operands = {"fwd": common[1:], "bwd": common, "bwd2": [*common, fresh, fresh]}
    operand_dtypes = {"fwd": (left, right), "bwd": (go, left, right),
                      "bwd2": (go, left, right, left, right)}

    def sibling(op: str) -> LaunchKey:
        mixed = mixed_dtypes(operand_dtypes[op], signature.dtype)
        return LaunchKey(op, key.device, key.limit, key.geometry,
                         Signature(signature.dtype, tuple(a for a, _ in operands[op]),
                                   signature.wide,
                                   (signature.scalars[0],
                                    *(c for _, classes in operands[op] for c in classes)),
                                   mixed, signature.rounded_on_load and bool(mixed)))

    return [sibling(op) for op in _SIBLINGS if op != key.op and key.op in _SIBLINGS]
