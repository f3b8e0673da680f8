"""The reference composition against an independent per-(node, focus, channel) construction,
and its derivative formulas against autograd, in float64."""

import pytest
import torch

from gridpair import reference, reference_grid_pair
from numerics import draw, force_quantities


def slow_grid_pair(left, right, to_grid, from_grid, n_frames):
    """out = F^T [(T l) * (T r)] one (n, f, c) vector at a time, slots ordered (d, k)."""
    n, d, f, kc = left.shape
    c_total = kc // n_frames
    out = torch.zeros_like(left)
    for node in range(n):
        for focus in range(f):
            for c in range(c_total):
                # slot d*K + k holds channel c of frame k at degree d
                cols = [k * c_total + c for k in range(n_frames)]
                x_l = left[node, :, focus][:, cols].reshape(-1)
                x_r = right[node, :, focus][:, cols].reshape(-1)
                y = from_grid.T @ ((to_grid @ x_l) * (to_grid @ x_r))
                out[node, :, focus][:, cols] = y.reshape(d, n_frames)
    return out


@pytest.mark.parametrize(("nodes", "degrees", "focus", "frames", "channels", "grid"),
                         [(2, 9, 2, 3, 4, 23), (3, 4, 1, 1, 5, 7), (1, 16, 3, 2, 3, 11)])
def test_reference_matches_the_slot_by_slot_definition(nodes, degrees, focus, frames,
                                                       channels, grid):
    ops = draw(nodes, degrees, focus, frames, channels, grid, seed=1)
    got = reference_grid_pair(ops.left, ops.right, ops.to_grid, ops.from_grid, frames)
    want = slow_grid_pair(ops.left, ops.right, ops.to_grid, ops.from_grid, frames)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_slots_run_degree_major_then_frame():
    """A projector touching only slot d*K + k reads exactly degree d of frame k."""
    nodes, degrees, focus, frames, channels, grid = 1, 3, 1, 2, 2, 1
    left = torch.zeros(nodes, degrees, focus, frames * channels, dtype=torch.float64)
    left[0, 2, 0, 1 * channels + 1] = 3.0  # degree 2, frame 1, channel 1
    to_grid = torch.zeros(grid, degrees * frames, dtype=torch.float64)
    to_grid[0, 2 * frames + 1] = 1.0
    out = reference_grid_pair(left, left, to_grid, to_grid, frames)
    assert out[0, 2, 0, 1 * channels + 1] == 9.0
    assert out.count_nonzero() == 1


@pytest.mark.parametrize("layout", ["contiguous", "degree_major"])
def test_derivative_formulas_match_autograd(layout):
    ops = draw(3, 9, 2, 3, 4, 23, seed=2, layout=layout)
    autograd = force_quantities(reference_grid_pair, ops)
    grad_left, grad_right = reference.bwd(ops.cotangent, ops.left, ops.right, ops.to_grid,
                                          ops.from_grid, 3)
    grad2_out, grad2_left, grad2_right = reference.bwd2(
        ops.cotangent, ops.left, ops.right, ops.grad_grad_left, ops.grad_grad_right,
        ops.to_grid, ops.from_grid, 3)
    explicit = {"grad_left": grad_left, "grad_right": grad_right, "grad2_out": grad2_out,
                "grad2_left": grad2_left, "grad2_right": grad2_right}
    for name, value in explicit.items():
        torch.testing.assert_close(value, autograd[name], rtol=1e-10, atol=1e-10, msg=name)


def test_second_backward_without_the_cotangent_is_the_first_backward_of_the_grad_grads():
    """g2_l = T^T[(F go)(T h_r)], g2_r = T^T[(F go)(T h_l)] is bwd applied to (go, h_l, h_r):
    the identity the ops use when the cotangent needs no gradient."""
    ops = draw(3, 16, 2, 3, 5, 29, seed=8)
    go, h_left, h_right = ops.cotangent, ops.grad_grad_left, ops.grad_grad_right
    _, g2_left, g2_right = reference.bwd2(go, ops.left, ops.right, h_left, h_right,
                                          ops.to_grid, ops.from_grid, ops.n_frames)
    via_bwd = reference.bwd(go, h_left, h_right, ops.to_grid, ops.from_grid, ops.n_frames)
    torch.testing.assert_close(via_bwd, (g2_left, g2_right), rtol=1e-12, atol=1e-12)
