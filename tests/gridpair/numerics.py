"""Numerics helpers of the gridpair tests: operands, the force-loss quantities of a grid-pair
function up to second order, and errors relative to a float64 evaluation of the reference.

Every bound is stated relative to the reference composition's own error in the working
precision: a candidate passes when its distance from float64 is within ``factor`` times the
reference's distance (plus a floor of a few ulps, so an exact reference does not demand an
exact candidate).
"""

from dataclasses import dataclass

import torch

from gridpair import reference_grid_pair

QUANTITIES = ("out", "grad_left", "grad_right", "grad2_left", "grad2_right", "grad2_out")


@dataclass
class Operands:
    left: torch.Tensor
    right: torch.Tensor
    to_grid: torch.Tensor
    from_grid: torch.Tensor
    n_frames: int
    cotangent: torch.Tensor  # go: d(loss)/d(out)
    grad_grad_left: torch.Tensor  # h_l: d(force loss)/d(g_l)
    grad_grad_right: torch.Tensor

    def to(self, dtype=None, device=None) -> "Operands":
        def move(t):
            return t.to(dtype=dtype, device=device)

        return Operands(move(self.left), move(self.right), move(self.to_grid),
                        move(self.from_grid), self.n_frames, move(self.cotangent),
                        move(self.grad_grad_left), move(self.grad_grad_right))


def draw(nodes, degrees, focus, frames, channels, grid, *, seed, layout="contiguous",
         device="cpu") -> Operands:
    """float64 operands; layout 'degree_major' makes (N, D, ...) views of (D, N, ...) storage
    with a channel slice, so strides depend on N and the last axis is not the whole row (and
    the first element is not 16-byte aligned); 'degree_major_aligned' omits the slice."""
    gen = torch.Generator().manual_seed(seed)

    def coefficients():
        packed = frames * channels
        if layout == "contiguous":
            return torch.randn(nodes, degrees, focus, packed, generator=gen, dtype=torch.float64)
        if layout == "degree_major":
            base = torch.randn(degrees, nodes, focus, packed + 5, generator=gen,
                               dtype=torch.float64)
            return base.transpose(0, 1)[..., 2:2 + packed]
        if layout == "degree_major_aligned":  # N-dependent strides, 16-byte aligned start
            base = torch.randn(degrees, nodes, focus, packed, generator=gen, dtype=torch.float64)
            return base.transpose(0, 1)
        raise ValueError(layout)

    def projector():
        # Scaled so grid fields stay O(1) whatever D*K is.
        scale = (degrees * frames) ** -0.5
        return torch.randn(grid, degrees * frames, generator=gen, dtype=torch.float64) * scale

    ops = Operands(coefficients(), coefficients(), projector(), projector(), frames,
                   coefficients(), coefficients(), coefficients())
    return ops.to(device=device) if device != "cpu" else ops


def force_quantities(fn, ops: Operands) -> dict[str, torch.Tensor]:
    """out, first-order and second-order gradients of ``fn`` as a force-loss step needs them."""
    left = ops.left.detach().requires_grad_()
    right = ops.right.detach().requires_grad_()
    cotangent = ops.cotangent.detach().requires_grad_()
    out = fn(left, right, ops.to_grid, ops.from_grid, ops.n_frames)
    grad_left, grad_right = torch.autograd.grad(out, (left, right), cotangent, create_graph=True)
    force_loss = (grad_left * ops.grad_grad_left).sum() + (grad_right * ops.grad_grad_right).sum()
    grad2_left, grad2_right, grad2_out = torch.autograd.grad(force_loss, (left, right, cotangent))
    values = (out, grad_left, grad_right, grad2_left, grad2_right, grad2_out)
    return {name: v.detach() for name, v in zip(QUANTITIES, values)}


def relative_error(value: torch.Tensor, exact: torch.Tensor) -> float:
    exact = exact.double().cpu()
    return ((value.double().cpu() - exact).norm() / exact.norm().clamp_min(1e-300)).item()


def assert_within_reference_error(candidate: dict, reference: dict, exact: dict, *,
                                  factor: float = 5.0, dtype=torch.float32) -> dict:
    """Each candidate quantity within ``factor`` x the reference's own error from float64."""
    floor = 4 * torch.finfo(dtype).eps
    report = {}
    for name in QUANTITIES:
        got = relative_error(candidate[name], exact[name])
        own = relative_error(reference[name], exact[name])
        report[name] = (got, own)
        assert got <= factor * max(own, floor), (
            f"{name}: relative error {got:.3e} exceeds {factor} x the reference's own "
            f"{own:.3e} (floor {floor:.1e}); all: {report}"
        )
    return report


def reference_quantities(ops: Operands, dtype=torch.float32) -> tuple[dict, dict]:
    """(reference in ``dtype``, reference in float64) quantities."""
    return (force_quantities(reference_grid_pair, ops.to(dtype)),
            force_quantities(reference_grid_pair, ops))


def force_step(left, right, to_grid, from_grid, n_frames=3):
    """A force-training step through grid_pair: the energy, and the gradients of a force loss
    (the squared first-order gradients) with respect to the operands. Traceable by make_fx."""
    from gridpair import grid_pair

    left = left.detach().requires_grad_()
    right = right.detach().requires_grad_()
    out = grid_pair(left, right, to_grid, from_grid, n_frames)
    energy = (out.float() * out.float()).sum()
    grad_left, grad_right = torch.autograd.grad(energy, (left, right), create_graph=True)
    force_loss = (grad_left.float() ** 2).sum() + (grad_right.float() ** 2).sum()
    return (energy.detach(), *torch.autograd.grad(force_loss, (left, right)))
