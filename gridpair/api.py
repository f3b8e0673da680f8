"""The public operator ``grid_pair``: checks its input, then runs the eager path or the
custom-op chain."""

from torch import Tensor

from gridpair.eager import grid_pair_eager
from gridpair.inputs import check_constant_projectors, check_operands
from gridpair.ops import forward_checked  # (and registers torch.ops.gridpair.*)
from gridpair.tracing import nothing_traces


def grid_pair(
    left: Tensor, right: Tensor, to_grid: Tensor, from_grid: Tensor, n_frames: int
) -> Tensor:
    """out = from_grid^T [(to_grid @ l) * (to_grid @ r)], differentiable to second order.

    Args:
        left, right: (N, D, F, K*C) coefficients (N nodes, D degrees, F focus, K = n_frames
            frames of C channels packed along the last axis), any strides.
        to_grid, from_grid: (G, D*K) constant projectors, slot axis ordered (d, k); no
            gradient flows to them.
        n_frames: K, at least 1.

    Returns:
        (N, D, F, K*C), contiguous, in the operands' dtype (the autocast dtype under CUDA AMP).

    Fused Triton kernels run on CUDA with a launch validated for the device; elsewhere, and
    where no launch fits, the same custom ops compute the reference composition. Eager calls
    on real CUDA tensors skip the custom ops' dispatch (``gridpair.eager``); anything traced
    sees ``torch.ops.gridpair.*``. The input is checked once, here, on either path.
    """
    check_operands(left, right, to_grid, from_grid, n_frames)
    check_constant_projectors(to_grid, from_grid)
    if nothing_traces((left, right, to_grid, from_grid)):
        return grid_pair_eager(left, right, to_grid, from_grid, n_frames)
    return forward_checked(left, right, to_grid, from_grid, n_frames)
