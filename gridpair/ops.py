"""Custom ops ``torch.ops.gridpair.grid_pair_{fwd,bwd,bwd2}``: the autograd chain, autocast rule
and dispatch between fused kernels and the reference composition.

Each op is a ``triton_op`` whose body is also its fake implementation: it asks the selector for
a tile (which compiles and validates before anything is traced) and then either launches the
kernel through ``wrap_triton`` or computes the reference composition with ordinary torch ops, so
the compiler sees a traceable graph in every case and on every device.
"""

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch._library.triton
from torch import Tensor
from torch.library import triton_op

from gridpair import reference
from gridpair.inputs import check_constant_projectors, check_inputs
from gridpair.kernels import KERNELS, OPERANDS
from gridpair.launch import launch
from gridpair.selector import active_selector, using_selector


def _compute(op: str, operands: Sequence[Tensor], to_grid: Tensor, from_grid: Tensor,
             n_frames: int, compute_dtype: torch.dtype | None) -> tuple[Tensor, ...]:
    # The ops are public too: they check everything grid_pair checks, projectors included.
    where = f"gridpair::grid_pair_{op}: "
    check_inputs(dict(zip(OPERANDS[op], operands, strict=True)), to_grid, from_grid, n_frames,
                 compute_dtype=compute_dtype, where=where)
    check_constant_projectors(to_grid, from_grid, where=where)
    # The kernels read contiguous projectors: a no-op for the usual constant buffers, and their
    # layout cannot then change the compiled kernel.
    to_grid, from_grid = to_grid.contiguous(), from_grid.contiguous()
    tile = active_selector().choose(op, operands, (to_grid, from_grid), n_frames)
    if tile is None or operands[0].device.type != "cuda":
        return reference.of_op(op, *operands, to_grid, from_grid, n_frames)
    return launch(op, operands, to_grid, from_grid, n_frames, tile)


@contextmanager
def _kernels_known_to_triton_op() -> Iterator[None]:
    """``triton_op`` finds the kernels an op launches by parsing its source, which imports
    Inductor (more than a second of ``import gridpair``); our ops launch exactly KERNELS, so
    tell it that instead. Without that private hook, ``triton_op`` does its own search."""
    finder = getattr(torch._library.triton, "get_inner_triton_kernels", None)
    if finder is None:
        yield
        return
    torch._library.triton.get_inner_triton_kernels = lambda fn: list(KERNELS.values())
    try:
        yield
    finally:
        torch._library.triton.get_inner_triton_kernels = finder


def _gridpair_op(name: str) -> Callable[[Callable[..., object]], Any]:
    """``triton_op`` registration of ``gridpair::name``, told which kernels it launches."""

    def register(body: Callable[..., object]) -> Any:
        with _kernels_known_to_triton_op():
            return triton_op(f"gridpair::{name}", mutates_args=())(body)

    return register


# ``compute_dtype`` (None: every tensor in one dtype) is the mixed-precision form autocast calls:
# projectors in ``compute_dtype``, each operand in it or in float32. The forward's output comes
# in ``compute_dtype`` and each gradient in the dtype of its operand, stored so by the kernel
# (no bf16 gradient and float32 copy side by side, no rounded copies saved for the backward).
# Traced, the op casts float32 operands to ``compute_dtype`` itself before the launch, where
# Inductor fuses the cast into the kernel that makes them; on real tensors the kernel rounds
# them as it loads them (``launch.launch``).
@_gridpair_op("grid_pair_fwd")
def grid_pair_fwd(left: Tensor, right: Tensor, to_grid: Tensor, from_grid: Tensor,
                  n_frames: int, compute_dtype: torch.dtype | None = None) -> Tensor:
    """out = F^T [(T l) * (T r)]."""
    (out,) = _compute("fwd", (left, right), to_grid, from_grid, n_frames, compute_dtype)
    return out


@_gridpair_op("grid_pair_bwd")
def grid_pair_bwd(grad_out: Tensor, left: Tensor, right: Tensor, to_grid: Tensor,
                  from_grid: Tensor, n_frames: int,
                  compute_dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor]:
    """(g_l, g_r) = (T^T [(F go)(T r)], T^T [(F go)(T l)])."""
    grad_left, grad_right = _compute("bwd", (grad_out, left, right), to_grid, from_grid,
                                     n_frames, compute_dtype)
    return grad_left, grad_right


@_gridpair_op("grid_pair_bwd2")
def grid_pair_bwd2(grad_out: Tensor, left: Tensor, right: Tensor, grad_grad_left: Tensor,
                   grad_grad_right: Tensor, to_grid: Tensor, from_grid: Tensor,
                   n_frames: int, compute_dtype: torch.dtype | None = None,
                   ) -> tuple[Tensor, Tensor, Tensor]:
    """(ggo, g2_l, g2_r): ggo = F^T [(T h_l)(T r) + (T l)(T h_r)], g2_l = T^T [(F go)(T h_r)],
    g2_r = T^T [(F go)(T h_l)]."""
    ggo, g2_left, g2_right = _compute(
        "bwd2", (grad_out, left, right, grad_grad_left, grad_grad_right), to_grid, from_grid,
        n_frames, compute_dtype,
    )
    return ggo, g2_left, g2_right


# -- autograd: fwd -> bwd -> bwd2 (bwd again where the cotangent needs no gradient), then the
# reference for any higher order -------------------------------------------------------------
def _save(ctx, inputs, output) -> None:
    *tensors, n_frames, compute_dtype = inputs
    ctx.save_for_backward(*tensors)
    ctx.n_frames, ctx.compute_dtype = n_frames, compute_dtype
    # The backward runs where autograd runs it - on CUDA, in the engine's device thread, which
    # does not see this thread's using_selector context - so it takes the forward's selector.
    ctx.selector = active_selector()


def _with_forward_selector(backward):
    """Run ``backward`` with the selector that was active when its forward ran."""

    @functools.wraps(backward)
    def run(ctx, *grads):
        with using_selector(ctx.selector):
            return backward(ctx, *grads)

    return run


@_with_forward_selector
def _fwd_backward(ctx, grad_out):
    left, right, to_grid, from_grid = ctx.saved_tensors
    grad_left, grad_right = torch.ops.gridpair.grid_pair_bwd(
        grad_out, left, right, to_grid, from_grid, ctx.n_frames, ctx.compute_dtype)
    return grad_left, grad_right, None, None, None, None


@_with_forward_selector
def _bwd_backward(ctx, grad_grad_left, grad_grad_right):
    grad_out, left, right, to_grid, from_grid = ctx.saved_tensors
    if not ctx.needs_input_grad[0]:
        # Nothing asks for the cotangent's gradient (an energy with fixed weights): the other
        # two outputs of the second backward are the first backward of (go, h_l, h_r),
        # g2_l = T^T[(F go)(T h_r)] and g2_r = T^T[(F go)(T h_l)] - five grid products instead
        # of eight, as autograd would prune the reference composition.
        g2_left, g2_right = torch.ops.gridpair.grid_pair_bwd(
            grad_out, grad_grad_left, grad_grad_right, to_grid, from_grid, ctx.n_frames,
            ctx.compute_dtype)
        return None, g2_left, g2_right, None, None, None, None
    ggo, g2_left, g2_right = torch.ops.gridpair.grid_pair_bwd2(
        grad_out, left, right, grad_grad_left, grad_grad_right, to_grid, from_grid,
        ctx.n_frames, ctx.compute_dtype)
    return ggo, g2_left, g2_right, None, None, None, None


def _bwd2_backward(ctx, *grads):
    """Third order: differentiate the reference second backward (no fused kernel for it)."""
    *tensors, to_grid, from_grid = ctx.saved_tensors
    return (*reference.bwd2_vjp(tensors, to_grid, from_grid, ctx.n_frames, grads), None, None,
            None, None)


grid_pair_fwd.register_autograd(_fwd_backward, setup_context=_save)
grid_pair_bwd.register_autograd(_bwd_backward, setup_context=_save)
grid_pair_bwd2.register_autograd(_bwd2_backward, setup_context=_save)


# -- autocast: the kernels compute in the autocast dtype with fp32 accumulation ----------------
def _register_autocast(op, device_type: str) -> None:
    """Under autocast, run the op in the autocast dtype with autocast off: the projectors (when
    torch's rule casts them) are cast and become the ``compute_dtype``, float32 operands stay
    float32 for the kernels to round as they load them, and other eligible operands are cast.
    Without castable projectors every eligible input is cast and ``compute_dtype`` is left as
    given. (``torch.library.register_autocast`` fixes one dtype; this follows whatever dtype
    the autocast region asks for.) The CPU rule keeps graphs alike on every device."""
    key_name = "Autocast" + torch._C._dispatch_key_for_device(device_type)
    key = getattr(torch._C.DispatchKey, key_name)
    names = [argument.name for argument in op._schema.arguments]
    n_operands = names.index("to_grid")

    def autocast_kernel(*args, **kwargs):
        dtype = torch.get_autocast_dtype(device_type)
        values = {**dict(zip(names, args)), **kwargs}
        values.setdefault("compute_dtype", None)
        mixed = all(autocast_eligible(values[name], device_type)
                    for name in ("to_grid", "from_grid"))
        for index, name in enumerate(names):
            value = values.get(name)
            if not autocast_eligible(value, device_type):
                continue
            if not (mixed and index < n_operands and value.dtype == torch.float32):
                values[name] = value.to(dtype)
        if mixed:
            values["compute_dtype"] = dtype
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
            return op(*(values[name] for name in names if name in values))

    op.py_kernels.pop(key, None)
    op.py_impl(key)(autocast_kernel)
    _LIBRARY.impl(op._schema.name.split("::")[1],
                  lambda _keyset, *args, **kwargs: autocast_kernel(*args, **kwargs),
                  key_name, with_keyset=True)


def autocast_eligible(value: object, device_type: str) -> bool:
    """torch's own rule (``cached_cast`` in aten/src/ATen/autocast_mode.h): a floating tensor
    on the autocast device, and never float64."""
    return (isinstance(value, Tensor) and value.is_floating_point()
            and value.dtype != torch.float64 and value.device.type == device_type)


_LIBRARY = torch.library.Library("gridpair", "FRAGMENT")
for _op in (torch.ops.gridpair.grid_pair_fwd.default, torch.ops.gridpair.grid_pair_bwd.default,
            torch.ops.gridpair.grid_pair_bwd2.default):
    for _device_type in ("cuda", "cpu"):
        _register_autocast(_op, _device_type)
