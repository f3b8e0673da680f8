"""The eager path of ``grid_pair``: plain ``autograd.Function``s that launch the validated
kernels through Triton's JIT, for calls on real tensors that nothing traces.

The custom ops of ``ops.py`` are what tracing sees, and they stay the only path under
``torch.compile``, ``make_fx``, fake tensors, functorch transforms, TorchScript tracing and any
dispatch or function mode (``tracing.nothing_traces``). Eager, their dispatch costs more host time
than the kernels take on the GPU (custom-op and autograd wrappers, the autocast kernel,
``wrap_triton``'s mutation wrapper; figures in docs/design-gridpair.md). This path asks the same
selector - the same key outside autocast, the same cached decision and events - once per layout of
its operands, and again whenever the selector's decisions change (``_PREPARED``); it launches the
same compiled kernel from the JIT cache that validation filled, found by the JIT on a key's first
launch and kept for the next (``launch._launch_resolved``); it never compiles anything itself.

Under autocast this path hands float32 coefficients to the kernels as they are: the kernels
round them to the autocast dtype as they load them (the same dot inputs as a cast before the
launch) and store each gradient in its operand's float32, so the step has no cast kernels and
no autograd nodes for them, which eagerly cost more host time than they save on the GPU.
Traced, the custom ops cast those operands first instead, a cast Inductor fuses into the kernel
that makes them, so the kernels read half the bytes (both figures in docs/design-gridpair.md).
The two launches differ in ``signature.Signature.rounded_on_load``; each is validated before it
runs. The autograd chain and the autocast rule are ``gridpair.autograd``'s, shared with the ops.
"""

import weakref
from collections.abc import Sequence

import torch
from torch import Tensor

from gridpair import autograd, devices, reference
from gridpair.active import active_selector
from gridpair.devices import DeviceLimits
from gridpair.launch import DirectLaunch, ProjectorCache, launch, launch_prepared
from gridpair.selector import LaunchSelector
from gridpair.tracing import rounds_on_load


def autocast_inputs(tensors: Sequence[Tensor]) -> list[Tensor]:
    """(left, right, to_grid, from_grid) as the ops' autocast kernel passes them on
    (``autograd.autocast_arguments``), under autocast on their device. The constant projectors'
    casts are kept (``ProjectorCache``), as autocast keeps its weights' casts."""
    device_type = tensors[0].device.type
    if not torch.is_autocast_enabled(device_type):
        return list(tensors)
    operands, projectors, _ = autograd.autocast_arguments(tensors[:2], tensors[2:], device_type,
                                                          _cast)
    return [*operands, *projectors]


_CASTS: dict[torch.dtype, ProjectorCache] = {}


def _cast(projector: Tensor, dtype: torch.dtype) -> Tensor:
    if projector.dtype == dtype:
        return projector
    if projector.is_inference():
        return projector.to(dtype)
    if dtype not in _CASTS:
        _CASTS[dtype] = ProjectorCache(lambda p: p.to(dtype))
    return _CASTS[dtype](projector)


# The launch prepared for each layout of each op's operands (``launch.DirectLaunch``), with
# the selector and revision it was chosen under: the selector's key and the launch's
# preparation cost more host time than the kernel's own launch, and everything they read from
# the operands is in the layout, so a repeat call on the same layout asks no more than a dict
# lookup, while the selector's cached decisions are the
# ones it made (``LaunchSelector.revision``).
_PREPARED: dict[tuple, tuple[weakref.ref, int, DirectLaunch]] = {}


def _layout(op: str, operands: Sequence[Tensor], to_grid: Tensor, n_frames: int,
            limits: DeviceLimits) -> tuple:
    """All the selector's key and a launch's preparation read: the device and its limit, the
    compute dtype, the geometry and each operand's class, shape, strides, dtype and
    alignment."""
    return (op, n_frames, limits.identity, limits.shared, to_grid.dtype, to_grid.shape,
            *[(type(x), x.shape, x.stride(), x.dtype, x.data_ptr() % 16 == 0)
              for x in operands])


def _compute(op: str, operands: Sequence[Tensor], to_grid: Tensor, from_grid: Tensor,
             n_frames: int, selector: LaunchSelector) -> tuple[Tensor, ...]:
    """The launch the op would make (same selector question first), or the reference
    composition where nothing fits."""
    # No .contiguous() here, unlike the ops: the launch reads padded copies, contiguous
    # whatever the projectors' layout, and cached per projector only if it is the caller's.
    if type(selector).choose is LaunchSelector.choose and type(selector).key is LaunchSelector.key:
        limits = devices.limits_for(operands[0].device)
        layout = None
        # A selector that overrides choose_keyed is asked on every call.
        if limits is not None and type(selector).choose_keyed is LaunchSelector.choose_keyed:
            layout = _layout(op, operands, to_grid, n_frames, limits)
            prepared = _PREPARED.get(layout)
            if (prepared is not None and prepared[0]() is selector
                    and prepared[1] == selector.revision):
                if selector.listened:  # they hear of every choice, cached ones too
                    selector.choose_keyed(op, operands, (to_grid, from_grid), n_frames)
                return prepared[2](operands, to_grid, from_grid)
        key, tile, revision = selector.choose_held(op, operands, (to_grid, from_grid), n_frames)
        if layout is not None and key is not None and tile is not None \
                and rounds_on_load(operands):
            direct, results = launch_prepared(op, key, tile, operands, to_grid, from_grid)
            if revision is not None:
                if len(_PREPARED) >= 1024:
                    _PREPARED.clear()
                _PREPARED[layout] = (weakref.ref(selector), revision, direct)
            return results
    else:  # a selector that chooses or keys otherwise: ask it, launch through the JIT
        key, tile = None, selector.choose(op, operands, (to_grid, from_grid), n_frames)
    if tile is not None:
        return launch(op, operands, to_grid, from_grid, n_frames, tile, direct=True, key=key)
    with torch.autocast(operands[0].device.type, enabled=False):
        return reference.of_op(op, *operands, to_grid, from_grid, n_frames)


class _Forward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, left, right, to_grid, from_grid, n_frames, selector):
        autograd.save(ctx, (left, right, to_grid, from_grid), n_frames, selector, None)
        (out,) = _compute("fwd", (left, right), to_grid, from_grid, n_frames, selector)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        return autograd.fwd_backward(_STEPS, ctx, grad_out)


class _Backward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, grad_out, left, right, to_grid, from_grid, n_frames, selector):
        autograd.save(ctx, (grad_out, left, right, to_grid, from_grid), n_frames, selector, None)
        return _compute("bwd", (grad_out, left, right), to_grid, from_grid, n_frames, selector)

    @staticmethod
    def backward(ctx, grad_grad_left, grad_grad_right):
        return autograd.bwd_backward(_STEPS, ctx, grad_grad_left, grad_grad_right)


class _SecondBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, grad_out, left, right, grad_grad_left, grad_grad_right, to_grid,
                from_grid, n_frames, selector):
        autograd.save(ctx, (grad_out, left, right, grad_grad_left, grad_grad_right, to_grid,
                            from_grid), n_frames, selector, None)
        return _compute("bwd2", (grad_out, left, right, grad_grad_left, grad_grad_right),
                        to_grid, from_grid, n_frames, selector)

    @staticmethod
    def backward(ctx, *grads):
        return autograd.bwd2_backward(ctx, *grads)


class _EagerSteps:
    """The chain's steps as the autograd.Functions above: direct launches, no dispatcher."""

    def bwd(self, ctx, grad_out, left, right, to_grid, from_grid):
        return _Backward.apply(grad_out, left, right, to_grid, from_grid, ctx.n_frames,
                               ctx.selector)

    def bwd2(self, ctx, grad_out, left, right, grad_grad_left, grad_grad_right, to_grid,
             from_grid):
        return _SecondBackward.apply(grad_out, left, right, grad_grad_left, grad_grad_right,
                                     to_grid, from_grid, ctx.n_frames, ctx.selector)


_STEPS = _EagerSteps()


def grid_pair_eager(left: Tensor, right: Tensor, to_grid: Tensor, from_grid: Tensor,
                    n_frames: int) -> Tensor:
    """``grid_pair`` for checked inputs on which ``nothing_traces``."""
    left, right, to_grid, from_grid = autocast_inputs((left, right, to_grid, from_grid))
    return _Forward.apply(left, right, to_grid, from_grid, n_frames, active_selector())
