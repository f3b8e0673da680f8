"""The force-training step the cold regressions compile: operands on the test's device in
production layouts, the step traced once with make_fx and compiled, and the comparison with an
eager run.

torch.compile refuses a function that calls autograd.grad(create_graph=True) itself, so the step
is traced with make_fx(tracing_mode="symbolic") - forward, backward and second backward in one
graph - and that graph is compiled (dynamic, so node counts and the strides of degree-major
views that depend on them stay symbolic).
"""

import contextlib
from dataclasses import dataclass

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from gridpair import grid_pair
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


def make_step(n_frames: int):
    """energy = <out, w>; force loss = <g_l, h_l> + <g_r, h_r> with (g_l, g_r) the gradients of
    the energy; returns the energy and the force loss's gradients (forward, backward and second
    backward run once each). The readout weights w are trained, as in production: the
    cotangent of the first backward then needs a gradient and the second backward is bwd2."""

    def step(left, right, to_grid, from_grid, weight, h_left, h_right):
        left = left.detach().requires_grad_()
        right = right.detach().requires_grad_()
        weight = weight.detach().requires_grad_()
        out = grid_pair(left, right, to_grid, from_grid, n_frames)
        energy = (out.float() * weight).sum()
        grad_left, grad_right = torch.autograd.grad(energy, (left, right), create_graph=True)
        force_loss = (grad_left.float() * h_left).sum() + (grad_right.float() * h_right).sum()
        return (energy.detach(), *torch.autograd.grad(force_loss, (left, right)))

    return step


def compile_step(case: Case, backend, example):
    """make_fx graph of the step (traced under the case's autocast) compiled with ``backend``."""
    step = make_step(case.shape[2])
    with case.autocast():
        graph = make_fx(step, tracing_mode="symbolic")(*example)
    return torch.compile(graph, backend=backend, dynamic=True), step


def assert_matches_eager(case: Case, compiled_result, eager_result):
    """Energy and second-order gradients of the compiled step against the eager step, within
    a bound of the working precision (the compiled graph may sum in another order)."""
    bound = 2e-2 if case.precision == "bf16-amp" else 1e-4
    names = ("energy", "force-loss grad left", "force-loss grad right")
    for name, got, want in zip(names, compiled_result, eager_result, strict=True):
        assert got.shape == want.shape, name
        error = relative_error(got, want)
        assert error <= bound, f"{name}: compiled differs from eager by {error:.2e} > {bound}"
