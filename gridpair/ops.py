"""Custom ops ``torch.ops.gridpair.grid_pair_{fwd,bwd,bwd2}``: their registration, the chain and
autocast rule of ``gridpair.autograd`` with each step a custom op, and the choice between the
fused kernels and the reference composition.

Each op is a ``triton_op`` whose body is also its fake implementation: it asks the selector for
a tile (which compiles and validates before anything is traced) and then either launches the
kernel through ``wrap_triton`` or computes the reference composition with ordinary torch ops, so
the compiler sees a traceable graph in every case and on every device.
"""

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
import torch._library.triton
from torch import Tensor
from torch.library import triton_op

from gridpair import autograd, reference
from gridpair.active import active_selector, using_selector
from gridpair.geometry import OPERANDS
from gridpair.inputs import check_constant_projectors, check_inputs
from gridpair.kernels import KERNELS
from gridpair.launch import launch

# The arguments of ``grid_pair``'s own call of the forward op, which ``grid_pair`` has checked,
# for as long as that call lasts (``forward_checked``).
_CHECKED: ContextVar[tuple[object, ...] | None] = ContextVar("gridpair_checked_arguments",
                                                             default=None)


def forward_checked(left: Tensor, right: Tensor, to_grid: Tensor, from_grid: Tensor,
                    n_frames: int) -> Tensor:
    """``torch.ops.gridpair.grid_pair_fwd`` on arguments that ``grid_pair`` has checked: the op
    takes these very arguments as checked, so a traced ``grid_pair`` call checks its input once.
    (Any other arguments - autocast's casts, another caller's - the op checks itself.)"""
    if torch.compiler.is_compiling():  # Dynamo traces no ContextVar: the op checks again
        return torch.ops.gridpair.grid_pair_fwd(left, right, to_grid, from_grid, n_frames)
    token = _CHECKED.set((left, right, to_grid, from_grid, n_frames))
    try:
        return torch.ops.gridpair.grid_pair_fwd(left, right, to_grid, from_grid, n_frames)
    finally:
        _CHECKED.reset(token)


def _checked_by_grid_pair(op: str, tensors: Sequence[Tensor], n_frames: int,
                          compute_dtype: torch.dtype | None) -> bool:
    """Whether this is ``grid_pair``'s call of the forward op on the arguments it checked: the
    same check, word for word, as the op's own would be (``compute_dtype`` None)."""
    checked = _CHECKED.get()
    return (checked is not None and op == "fwd" and compute_dtype is None
            and len(tensors) == 4 and all(a is b for a, b in zip(checked, tensors))
            and type(n_frames) is int and checked[4] == n_frames)


def _compute(op: str, operands: Sequence[Tensor], to_grid: Tensor, from_grid: Tensor,
             n_frames: int, compute_dtype: torch.dtype | None) -> tuple[Tensor, ...]:
    # The ops are public too: they check everything grid_pair checks, projectors included -
    # but not grid_pair's own input again.
    if not _checked_by_grid_pair(op, (*operands, to_grid, from_grid), n_frames, compute_dtype):
        where = f"gridpair::grid_pair_{op}: "
        check_inputs(dict(zip(OPERANDS[op], operands, strict=True)), to_grid, from_grid,
                     n_frames, compute_dtype=compute_dtype, where=where)
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


# -- autograd: the chain of gridpair.autograd, each step a custom op ---------------------------
class _OpSteps:
    """The chain's steps as custom ops, under the forward's selector."""

    def bwd(self, ctx, grad_out, left, right, to_grid, from_grid):
        with using_selector(ctx.selector):
            return torch.ops.gridpair.grid_pair_bwd(grad_out, left, right, to_grid, from_grid,
                                                    ctx.n_frames, ctx.compute_dtype)

    def bwd2(self, ctx, grad_out, left, right, grad_grad_left, grad_grad_right, to_grid,
             from_grid):
        with using_selector(ctx.selector):
            return torch.ops.gridpair.grid_pair_bwd2(grad_out, left, right, grad_grad_left,
                                                     grad_grad_right, to_grid, from_grid,
                                                     ctx.n_frames, ctx.compute_dtype)


_STEPS = _OpSteps()


def _save(ctx, inputs, output) -> None:
    *tensors, n_frames, compute_dtype = inputs
    autograd.save(ctx, tensors, n_frames, active_selector(), compute_dtype)


grid_pair_fwd.register_autograd(functools.partial(autograd.fwd_backward, _STEPS),
                                setup_context=_save)
grid_pair_bwd.register_autograd(functools.partial(autograd.bwd_backward, _STEPS),
                                setup_context=_save)
grid_pair_bwd2.register_autograd(autograd.bwd2_backward, setup_context=_save)


# -- autocast: the rule of gridpair.autograd, registered for the ops --------------------------
def _register_autocast(op, device_type: str) -> None:
    """Under autocast, run the op with ``autograd.autocast_arguments`` and autocast off. The CPU
    rule keeps graphs alike on every device."""
    key_name = "Autocast" + torch._C._dispatch_key_for_device(device_type)
    key = getattr(torch._C.DispatchKey, key_name)
    names = [argument.name for argument in op._schema.arguments]
    n_operands = names.index("to_grid")

    def autocast_kernel(*args, **kwargs):
        values = {**dict(zip(names, args)), **kwargs}
        values.setdefault("compute_dtype", None)
        operands, projectors, compute_dtype = autograd.autocast_arguments(
            [values[name] for name in names[:n_operands]],
            [values["to_grid"], values["from_grid"]], device_type)
        values.update(zip(names, operands))
        values["to_grid"], values["from_grid"] = projectors
        if compute_dtype is not None:
            values["compute_dtype"] = compute_dtype
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
            return op(*(values[name] for name in names if name in values))

    op.py_kernels.pop(key, None)
    op.py_impl(key)(autocast_kernel)
    _LIBRARY.impl(op._schema.name.split("::")[1],
                  lambda _keyset, *args, **kwargs: autocast_kernel(*args, **kwargs),
                  key_name, with_keyset=True)


_LIBRARY = torch.library.Library("gridpair", "FRAGMENT")
for _op in (torch.ops.gridpair.grid_pair_fwd.default, torch.ops.gridpair.grid_pair_bwd.default,
            torch.ops.gridpair.grid_pair_bwd2.default):
    for _device_type in ("cuda", "cpu"):
        _register_autocast(_op, _device_type)
