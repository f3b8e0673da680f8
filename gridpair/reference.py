"""The reference composition of the grid-pair operator, as einsums on any device and dtype.

It is the semantics the fused kernels are judged against, the computation custom ops fall back
to where no launch fits or no GPU is present, and (in float64) the yardstick of the tests.
"""

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from gridpair.geometry import result_dtypes
from gridpair.inputs import check_operands


def _split_frames(x: Tensor, n_frames: int) -> Tensor:
    """(N, D, F, K*C) -> (N, D, F, K, C) view of the packed frame axis."""
    return x.unflatten(-1, (n_frames, x.shape[-1] // n_frames))


def _slots(projector: Tensor, n_frames: int) -> Tensor:
    """(G, D*K) -> (G, D, K): the slot axis runs (d, k)."""
    return projector.unflatten(-1, (-1, n_frames))


def to_grid(x: Tensor, to_grid: Tensor, n_frames: int) -> Tensor:
    """Project (N, D, F, K*C) coefficients to the grid: (N, F, G, C)."""
    return torch.einsum("gdk,ndfkc->nfgc", _slots(to_grid, n_frames), _split_frames(x, n_frames))


def from_grid(field: Tensor, from_grid: Tensor, n_frames: int) -> Tensor:
    """Project a (N, F, G, C) grid field back to (N, D, F, K*C) coefficients: F^T field."""
    out = torch.einsum("gdk,nfgc->ndfkc", _slots(from_grid, n_frames), field)
    return out.flatten(-2)


def reference_grid_pair(
    left: Tensor, right: Tensor, to_grid: Tensor, from_grid: Tensor, n_frames: int
) -> Tensor:
    """out = from_grid^T [(to_grid @ l) * (to_grid @ r)], differentiable to any order.

    Args:
        left, right: (N, D, F, K*C) coefficients, K = n_frames frames of C channels each.
        to_grid, from_grid: (G, D*K) projectors, slot axis ordered (d, k).
        n_frames: K.

    Returns:
        (N, D, F, K*C) in the operands' dtype.
    """
    check_operands(left, right, to_grid, from_grid, n_frames)
    return fwd(left, right, to_grid, from_grid, n_frames)


def _back(a: Tensor, b: Tensor, proj_a: Tensor, proj_b: Tensor, back: Tensor, k: int) -> Tensor:
    """back^T [(proj_a a) * (proj_b b)]: the one shape every derivative term has."""
    return from_grid(to_grid(a, proj_a, k) * to_grid(b, proj_b, k), back, k)


def fwd(left, right, to_grid_, from_grid_, n_frames):
    """Forward of the reference composition, unvalidated (callers have validated)."""
    return _back(left, right, to_grid_, to_grid_, from_grid_, n_frames)


def bwd(grad_out, left, right, to_grid_, from_grid_, n_frames):
    """(g_l, g_r) = (T^T [(F go)(T r)], T^T [(F go)(T l)])."""
    return (
        _back(grad_out, right, from_grid_, to_grid_, to_grid_, n_frames),
        _back(grad_out, left, from_grid_, to_grid_, to_grid_, n_frames),
    )


def bwd2(grad_out, left, right, grad_grad_left, grad_grad_right, to_grid_, from_grid_, n_frames):
    """(ggo, g2_l, g2_r) of the second backward, h_l, h_r the grad-grads of g_l, g_r."""
    t_hl = to_grid(grad_grad_left, to_grid_, n_frames)
    t_hr = to_grid(grad_grad_right, to_grid_, n_frames)
    t_l = to_grid(left, to_grid_, n_frames)
    t_r = to_grid(right, to_grid_, n_frames)
    f_go = to_grid(grad_out, from_grid_, n_frames)
    return (
        from_grid(t_hl * t_r + t_l * t_hr, from_grid_, n_frames),
        from_grid(f_go * t_hr, to_grid_, n_frames),
        from_grid(f_go * t_hl, to_grid_, n_frames),
    )


def of_op(op: str, *args: Any) -> tuple[Tensor, ...]:
    """The reference computation of kernel ``op`` ("fwd", "bwd", "bwd2") on unvalidated
    arguments (operands, projectors, n_frames), its results always as a tuple.

    Computed in the projectors' dtype, as the kernels compute: operands in another dtype
    (float32 under autocast) are cast to it first, and each result is cast to its dtype
    (``geometry.RESULT_DTYPE_FROM``)."""
    *operands, to_grid_, from_grid_, n_frames = args
    compute = to_grid_.dtype
    dtypes = result_dtypes(op, [x.dtype for x in operands], compute)
    functions: dict[str, Callable[..., Any]] = {"fwd": fwd, "bwd": bwd, "bwd2": bwd2}
    result = functions[op](*(x.to(compute) for x in operands), to_grid_, from_grid_, n_frames)
    result = result if isinstance(result, tuple) else (result,)
    return tuple(x.to(dtype) for x, dtype in zip(result, dtypes, strict=True))


def bwd2_vjp(tensors, to_grid_, from_grid_, n_frames, grads):
    """Gradients of bwd2's five tensor inputs (go, l, r, h_l, h_r) for the cotangents ``grads``
    of its outputs: the third order, by differentiating this composition (no fused kernel)."""
    inputs = [t.detach().requires_grad_() for t in tensors]
    with torch.enable_grad():
        outputs = of_op("bwd2", *inputs, to_grid_, from_grid_, n_frames)
    return torch.autograd.grad(outputs, inputs, grads, allow_unused=True)
