"""The force-training step the cold regressions compile: operands on the test's device in
production layouts, the step traced once with make_fx and compiled, and the comparison with a
float64 evaluation of the reference composition.

torch.compile refuses a function that calls autograd.grad(create_graph=True) itself, so the step
is traced with make_fx(tracing_mode="symbolic") - forward, backward and second backward in one
graph - and that graph is compiled (dynamic, so node counts and the strides of degree-major
views that depend on them stay symbolic).
"""

import contextlib
from dataclasses import dataclass

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from gridpair import grid_pair, reference_grid_pair
from numerics import relative_error

LAYOUTS = {  # name: (lmax, frames K, focus F, channels C, grid G)
    "multi-focus": (6, 3, 2, 96, 584),
    "single-focus-packed": (6, 1, 1, 256, 584),
}
# Where the layout is not the point (every op falling back under a limit no tile fits), a small
# one: 64 slots instead of 147, so each of the many candidates it rejects compiles faster.
SMALL_LAYOUTS = {"small": (3, 4, 2, 8, 40)}
OPS = frozenset({"fwd", "bwd", "bwd2"})


@dataclass(frozen=True)
class Case:
    layout: str
    precision: str  # "float32" | "bf16-amp"
    device: str

    @property
    def shape(self):
        lmax, frames, focus, channels, grid = {**LAYOUTS, **SMALL_LAYOUTS}[self.layout]
        return (lmax + 1) ** 2, focus, frames, channels, grid

    def node_counts(self):
        # Sizes that change between calls, none of them 0 or 1 (which Dynamo specializes).
        return (300, 211, 128) if self.device == "cuda" else (6, 9, 13)

    def autocast(self):
        if self.precision == "bf16-amp":
            return torch.autocast(self.device, dtype=torch.bfloat16)
        return contextlib.nullcontext()


def operands(case: Case, nodes: int, seed: int):
    """(left, right, to_grid, from_grid, weight, h_left, h_right): left and right are
    degree-major views of (D, N, F, K*C + 4) storage with a channel offset of 4 (16-byte
    aligned in fp32), so their strides depend on N."""
    degrees, focus, frames, channels, grid = case.shape
    packed = frames * channels
    gen = torch.Generator().manual_seed(seed)

    def coefficients():
        base = torch.randn(degrees, nodes, focus, packed + 4, generator=gen)
        return base.to(case.device).transpose(0, 1)[..., 4:4 + packed]

    def projector():
        return torch.randn(grid, degrees * frames, generator=gen).to(case.device) * (
            degrees * frames) ** -0.5

    return (coefficients(), coefficients(), projector(), projector(),
            *(torch.randn(nodes, degrees, focus, packed, generator=gen).to(case.device)
              for _ in range(3)))


def _widened(x):
    # The step sums in at least fp32; a float64 evaluation stays float64.
    return x if x.dtype == torch.float64 else x.float()


def make_step(n_frames: int, pair=grid_pair):
    """energy = <out, w>; force loss = <g_l, h_l> + <g_r, h_r> with (g_l, g_r) the gradients of
    the energy; returns the energy and the force loss's gradients (forward, backward and second
    backward run once each). The readout weights w are trained, as in production: the
    cotangent of the first backward then needs a gradient and the second backward is bwd2.
    ``pair``: the grid-pair function (the fused op, or the reference composition)."""

    def step(left, right, to_grid, from_grid, weight, h_left, h_right):
        left = left.detach().requires_grad_()
        right = right.detach().requires_grad_()
        weight = weight.detach().requires_grad_()
        out = pair(left, right, to_grid, from_grid, n_frames)
        energy = (_widened(out) * weight).sum()
        grad_left, grad_right = torch.autograd.grad(energy, (left, right), create_graph=True)
        force_loss = (_widened(grad_left) * h_left).sum() + (_widened(grad_right) * h_right).sum()
        return (energy.detach(), *torch.autograd.grad(force_loss, (left, right)))

    return step


def compile_step(case: Case, backend, example):
    """make_fx graph of the step (traced under the case's autocast) compiled with ``backend``."""
    step = make_step(case.shape[2])
    with case.autocast():
        graph = make_fx(step, tracing_mode="symbolic")(*example)
    return torch.compile(graph, backend=backend, dynamic=True), step


# Each compiled quantity within FACTOR x the reference composition's own error (in the working
# precision, under the case's autocast) from float64, or a floor of a few ulps of that precision.
FACTOR = 5.0


def _energy_scale(case: Case, inputs) -> float:
    """sum |out * w| in float64: the size of the energy's terms. The energy is a sum of terms of
    both signs; measured against its own size, its error would be that of the cancellation,
    one sample of which the reference happens to make small or large."""
    left, right, to_grid, from_grid, weight = (x.double() for x in inputs[:5])
    out = reference_grid_pair(left, right, to_grid, from_grid, case.shape[2])
    return (out * weight).abs().sum().item()


def assert_matches_reference(case: Case, compiled_result, inputs) -> None:
    """Energy and second-order gradients of the compiled step against a float64 evaluation of
    the reference composition, bounded by the reference's own error in the working precision
    (the energy's errors relative to the size of its terms, the gradients' relative errors).

    Not against the eager fused step: its operands are 16-byte aligned where the traced ones
    are not (make_fx gives inputs a symbolic storage offset), so it would make another launch
    key and select again, which the regression is not about (it took 25 s of a 68 s fp32 run
    on the CPU)."""
    reference = make_step(case.shape[2], reference_grid_pair)
    exact = reference(*(x.double() for x in inputs))
    with case.autocast():
        own = reference(*inputs)
    working = torch.bfloat16 if case.precision == "bf16-amp" else torch.float32
    floor = 4 * torch.finfo(working).eps
    scale = _energy_scale(case, inputs)

    def error(value, want, name: str) -> float:
        if name == "energy":
            return abs(value.double().item() - want.item()) / scale
        return relative_error(value, want)

    names = ("energy", "force-loss grad left", "force-loss grad right")
    for name, got, ref, want in zip(names, compiled_result, own, exact, strict=True):
        assert got.shape == want.shape, name
        got_error, ref_error = error(got, want, name), error(ref, want, name)
        assert got_error <= FACTOR * max(ref_error, floor), (
            f"{name}: the compiled step is {got_error:.2e} from float64, more than {FACTOR} x "
            f"the reference composition's own {ref_error:.2e} (floor {floor:.1e})"
        )
