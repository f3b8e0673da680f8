"""The one autograd chain of grid_pair and its one autocast rule, shared by the custom ops
(``ops.py``) and the eager path (``eager.py``), which differ only in how a step computes.

The chain: fwd -> bwd -> bwd2 (bwd again where the cotangent needs no gradient), then the
reference composition for any higher order. A ``Steps`` object says how the next step runs
(a custom op through ``torch.ops.gridpair.*``, or the validated kernel launched directly), and
must itself be differentiable so the chain goes on.
"""

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
from torch import Tensor

from gridpair import reference


class Steps(Protocol):
    """The differentiable backward steps of one path, given the context its forward saved
    (``save``): ``ctx.n_frames``, ``ctx.selector`` and ``ctx.compute_dtype``."""

    def bwd(self, ctx: Any, grad_out: Tensor, left: Tensor, right: Tensor, to_grid: Tensor,
            from_grid: Tensor) -> tuple[Tensor, Tensor]: ...

    def bwd2(self, ctx: Any, grad_out: Tensor, left: Tensor, right: Tensor,
             grad_grad_left: Tensor, grad_grad_right: Tensor, to_grid: Tensor,
             from_grid: Tensor) -> tuple[Tensor, Tensor, Tensor]: ...


def save(ctx: Any, tensors: Sequence[Tensor], n_frames: int, selector: object,
         compute_dtype: torch.dtype | None) -> None:
    """What every step keeps for its backward. The backward runs where autograd runs it - on
    CUDA in the engine's device thread, which does not see the forward's selector context - so
    it takes the forward's selector."""
    ctx.save_for_backward(*tensors)
    ctx.n_frames, ctx.selector, ctx.compute_dtype = n_frames, selector, compute_dtype


def fwd_backward(steps: Steps, ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
    """Gradients of (left, right, to_grid, from_grid, n_frames, <path argument>)."""
    left, right, to_grid, from_grid = ctx.saved_tensors
    grad_left, grad_right = steps.bwd(ctx, grad_out, left, right, to_grid, from_grid)
    return grad_left, grad_right, None, None, None, None


def bwd_backward(steps: Steps, ctx: Any, grad_grad_left: Tensor,
                 grad_grad_right: Tensor) -> tuple[Tensor | None, ...]:
    """Gradients of (grad_out, left, right, to_grid, from_grid, n_frames, <path argument>)."""
    grad_out, left, right, to_grid, from_grid = ctx.saved_tensors
    if not ctx.needs_input_grad[0]:
        # Nothing asks for the cotangent's gradient (an energy with fixed weights): the other
        # two outputs of the second backward are the first backward of (go, h_l, h_r),
        # g2_l = T^T[(F go)(T h_r)] and g2_r = T^T[(F go)(T h_l)] - five grid products instead
        # of eight, as autograd would prune the reference composition.
        g2_left, g2_right = steps.bwd(ctx, grad_out, grad_grad_left, grad_grad_right, to_grid,
                                      from_grid)
        return None, g2_left, g2_right, None, None, None, None
    ggo, g2_left, g2_right = steps.bwd2(ctx, grad_out, left, right, grad_grad_left,
                                        grad_grad_right, to_grid, from_grid)
    return ggo, g2_left, g2_right, None, None, None, None


def bwd2_backward(ctx: Any, *grads: Tensor) -> tuple[Tensor | None, ...]:
    """Third order: differentiate the reference second backward (no fused kernel for it)."""
    *tensors, to_grid, from_grid = ctx.saved_tensors
    return (*reference.bwd2_vjp(tensors, to_grid, from_grid, ctx.n_frames, grads), None, None,
            None, None)


# -- autocast: the kernels compute in the autocast dtype with fp32 accumulation ----------------
def autocast_eligible(value: object, device_type: str) -> bool:
    """torch's own rule (``cached_cast`` in aten/src/ATen/autocast_mode.h): a floating tensor
    on the autocast device, and never float64."""
    return (isinstance(value, Tensor) and value.is_floating_point()
            and value.dtype != torch.float64 and value.device.type == device_type)


def _to(projector: Tensor, dtype: torch.dtype) -> Tensor:
    return projector.to(dtype)


def autocast_arguments(
    operands: Sequence[Any], projectors: Sequence[Any], device_type: str,
    cast_projector: Callable[[Tensor, torch.dtype], Tensor] = _to,
) -> tuple[list[Any], list[Any], torch.dtype | None]:
    """(operands, projectors, compute_dtype) as a step runs them inside an autocast region on
    ``device_type``: when torch's rule casts both projectors, they are cast to the autocast
    dtype, which becomes the ``compute_dtype``; float32 operands then stay float32 for the
    kernels to round as they load them (or for a traced op to cast, fused by Inductor), and
    other eligible operands are cast. Without castable projectors every eligible input is cast
    and ``compute_dtype`` is None (left as given). (``torch.library.register_autocast`` fixes
    one dtype; this follows whatever dtype the autocast region asks for.)"""
    dtype = torch.get_autocast_dtype(device_type)
    mixed = all(autocast_eligible(p, device_type) for p in projectors)
    operands = [x.to(dtype) if autocast_eligible(x, device_type)
                and not (mixed and x.dtype == torch.float32) else x
                for x in operands]
    projectors = [cast_projector(p, dtype) if autocast_eligible(p, device_type) else p
                  for p in projectors]
    return operands, projectors, (dtype if mixed else None)
