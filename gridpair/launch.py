"""The launch of a grid-pair kernel with a chosen tile: allocate the results, pad the
projectors, compute the launch grid and call the kernel - through ``wrap_triton`` where tracing
must record it, or through Triton's JIT directly on the eager path (``gridpair.eager``).
Either way the kernel is found in the JIT cache the selector's validation filled."""

import weakref
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from torch import Tensor
from torch.library import wrap_triton
from triton import knobs

from gridpair.geometry import (
    OPERANDS,
    Geometry,
    Tile,
    kernel_arguments,
    kernel_constexprs,
    result_dtypes,
    slot_cover,
)
from gridpair.kernels import KERNELS
from gridpair.signature import LaunchKey, needs_wide_offsets
from gridpair.tracing import interpreted, is_plain, nothing_traces, rounds_on_load


def pad_projector(projector: Tensor) -> Tensor:
    """A fresh contiguous copy zero-padded to the kernels' slot cover: no slot masks, aligned
    rows, and always 16-byte aligned, whatever the caller's tensor."""
    main, tail = slot_cover(projector.shape[1])
    return torch.nn.functional.pad(projector, (0, main + tail - projector.shape[1])).contiguous()


class ProjectorCache:
    """Values derived from constant projectors (padded copies, autocast casts), kept per
    projector tensor while it lives, and used while its storage and version counter (which an
    in-place write to it or to any view of it bumps) are unchanged. Keyed by identity through
    a weak reference, as cheaply as a dict lookup: it is consulted on every eager launch."""

    def __init__(self, derive: Callable[[Tensor], Tensor]) -> None:
        self._derive = derive
        self._entries: dict[int, tuple[weakref.ref, tuple, Tensor]] = {}

    def __call__(self, projector: Tensor) -> Tensor:
        stamp = (projector._version, projector.data_ptr(), projector.shape, projector.stride())
        entry = self._entries.get(id(projector))
        if entry is not None and entry[0]() is projector and entry[1] == stamp:
            return entry[2]
        derived = self._derive(projector)
        key = id(projector)
        entries = self._entries
        def forget(_: object, key: int = key) -> None:
            entries.pop(key, None)

        self._entries[key] = (weakref.ref(projector, forget), stamp, derived)
        return derived


# Projectors are constants that every launch pads again: a P147 projector pair is two copies and
# two allocations per launch.
_padded = ProjectorCache(lambda projector: pad_projector(projector))


def padded_projector(projector: Tensor) -> Tensor:
    """``pad_projector(projector)``, reused across launches while the projector is unchanged.

    Only for real tensors that nothing traces: under tracing the pad must be recorded, and an
    inference tensor has no version counter to tell a change."""
    if not nothing_traces([projector], anywhere=True):
        return pad_projector(projector)
    return _reused_padding(projector)


def _reused_padding(projector: Tensor) -> Tensor:
    # ``padded_projector`` for a direct launch, whose caller has checked that nothing traces.
    return pad_projector(projector) if projector.is_inference() else _padded(projector)


def launch_grid(n_rows: int, tile: Tile) -> tuple[int]:
    """One program per block of (pair, channel) rows."""
    return (-(-n_rows // tile.block_rows),)


def launch(op: str, operands: Sequence[Tensor], to_grid: Tensor, from_grid: Tensor,
           n_frames: int, tile: Tile, *, direct: bool = False,
           key: LaunchKey | None = None) -> tuple[Tensor, ...]:
    """Run kernel ``op`` ("fwd", "bwd", "bwd2") with ``tile``; return its fresh results.

    Operands are (N, D, F, K*C) in any strides, projectors (G, D*K) in the compute dtype.
    Operands in another dtype (float32 under autocast) reach the kernel as they are, rounded as
    they are loaded, when they are real tensors; traced ones are cast to fresh contiguous
    tensors first, a cast the compiler fuses into the kernel that makes them
    (``signature.Signature.rounded_on_load``). Results are contiguous, each in its dtype
    (``geometry.RESULT_DTYPE_FROM``: a gradient in its operand's, the forward's output in the
    compute dtype), stored by the kernel. ``direct``: nothing traces this call (the eager path),
    so the JIT runs the kernel itself and padded projectors are reused; otherwise
    ``wrap_triton`` records the launch. ``key``, with ``direct``: the selector's key for these
    operands, which the launch's specialization follows; the compiled kernel the JIT found for
    it is then launched again without the JIT's binder (``_launch_resolved``).
    """
    if len(operands) != len(OPERANDS[op]):
        raise ValueError(f"{op}: expected operands {OPERANDS[op]}, got {len(operands)} tensors")
    if direct and key is not None and rounds_on_load(operands):
        return DirectLaunch(op, key, tile, operands)(operands, to_grid, from_grid)
    first = operands[0]
    geometry = Geometry.of(first, to_grid, n_frames) if key is None else key.geometry
    compute = to_grid.dtype
    dtypes = result_dtypes(op, [x.dtype for x in operands], compute)
    results = tuple(torch.empty(first.shape, dtype=dtype, device=first.device)
                    for dtype in dtypes)
    n_rows = first.shape[0] * geometry.focus * geometry.channels
    if n_rows == 0:
        return results
    # The same decision as the selector's signature, so the validated kernel is the one run;
    # taken on the operands as given, before any cast.
    wide = (any(needs_wide_offsets(x) for x in operands) if key is None
            else key.signature.wide)
    if not rounds_on_load(operands):
        operands = cast_for_launch(operands, compute)
    pad = _reused_padding if direct else pad_projector
    args = kernel_arguments(operands, (pad(to_grid), pad(from_grid)), results, n_rows,
                            [x.stride() for x in operands])
    grid = launch_grid(n_rows, tile)
    kernel = KERNELS[op]
    constexprs = kernel_constexprs(geometry, tile, compute, wide)
    with _on_device_of(first):
        runner = kernel if direct or interpreted() else wrap_triton(kernel)
        runner[grid](*args, **constexprs, num_warps=tile.num_warps, num_stages=tile.num_stages)
    return results


class DirectLaunch:
    """An eager launch of kernel ``op`` with the selector's ``key`` and ``tile``, prepared
    once for operands laid out as ``operands`` are: result dtypes, grid, strides and
    constexprs, which ``key`` and the layout fix. Calling it on operands of that layout (same
    shapes, strides and dtypes; real tensors that nothing traces) allocates the results, pads
    the projectors (reused while unchanged) and launches: the compiled kernel the JIT found
    for (key, tile) on CUDA (``_launch_resolved``), the JIT under the interpreter. The eager
    path keeps one per layout (``gridpair.eager``), so a repeat launch does no more."""

    __slots__ = (
        "_constexprs",
        "_device",
        "_dtypes",
        "_grid",
        "_kernel",
        "_n_rows",
        "_shape",
        "_strides",
        "key",
        "op",
        "tile",
    )

    def __init__(self, op: str, key: LaunchKey, tile: Tile, operands: Sequence[Tensor]) -> None:
        first = operands[0]
        geometry = key.geometry
        self.op, self.key, self.tile = op, key, tile
        self._shape, self._device = first.shape, first.device
        self._dtypes = result_dtypes(op, [x.dtype for x in operands], key.signature.dtype)
        self._n_rows = first.shape[0] * geometry.focus * geometry.channels
        self._grid = launch_grid(self._n_rows, tile)
        self._strides = [x.stride() for x in operands]
        self._constexprs = kernel_constexprs(geometry, tile, key.signature.dtype,
                                             key.signature.wide)
        self._kernel = KERNELS[op]

    def __call__(self, operands: Sequence[Tensor], to_grid: Tensor,
                 from_grid: Tensor) -> tuple[Tensor, ...]:
        first = operands[0]
        results = tuple(torch.empty(self._shape, dtype=dtype, device=self._device)
                        for dtype in self._dtypes)
        if not self._n_rows:
            return results
        args = kernel_arguments(operands, (_reused_padding(to_grid), _reused_padding(from_grid)),
                                results, self._n_rows, self._strides)
        tile = self.tile
        with _on_device_of(first):
            if first.is_cuda:
                _launch_resolved(self._kernel, (self.key, tile), self._grid, args,
                                 self._constexprs, tile)
            else:
                self._kernel[self._grid](*args, **self._constexprs, num_warps=tile.num_warps,
                                         num_stages=tile.num_stages)
        return results


def launch_prepared(op: str, key: LaunchKey, tile: Tile, operands: Sequence[Tensor],
                    to_grid: Tensor, from_grid: Tensor) -> tuple[DirectLaunch, tuple[Tensor, ...]]:
    """Prepare the ``DirectLaunch`` of this layout and launch it: the prepared launch, for the
    caller to keep, and the results."""
    direct = DirectLaunch(op, key, tile, operands)
    return direct, direct(operands, to_grid, from_grid)


def cast_for_launch(operands: Sequence[Tensor], compute: torch.dtype) -> list[Tensor]:
    """Traced operands as a launch hands them to the kernel: those in another dtype cast to
    ``compute`` as fresh contiguous tensors (the layout ``signature.signature_of`` specializes)."""
    return [x if x.dtype == compute else x.to(compute, memory_format=torch.contiguous_format)
            for x in operands]


# The compiled kernel the JIT found for each (selector key, tile) of an eager launch. The key
# holds everything the JIT specializes a launch on (test_selector.py checks the signature
# against Triton's own binder), and the pointers it leaves out are padded projectors and
# results, fresh allocations, always aligned. A repeat launch then skips the JIT's binder and
# cache-key hashing, a large share of an eager step's host time; it is the same kernel object,
# never a new compile.
_RESOLVED: dict[tuple, Any] = {}


def _launch_resolved(kernel, memo: tuple, grid: tuple[int], args: list[object],
                     constexprs: dict[str, object], tile: Tile) -> None:
    # Triton's options that enter the JIT's cache key, and hooks that must see every launch.
    if kernel.pre_run_hooks or knobs.runtime.add_stages_inspection_hook is not None:
        kernel[grid](*args, **constexprs, num_warps=tile.num_warps, num_stages=tile.num_stages)
        return
    # The key names the device (the current one here), as the JIT's caches are per device.
    memo = (*memo, knobs.runtime.debug, knobs.compilation.instrumentation_mode)
    compiled = _RESOLVED.get(memo)
    if compiled is None:
        # The constexprs go positionally below, after the runtime arguments.
        if list(constexprs) != kernel.arg_names[len(args):]:
            raise RuntimeError(f"{kernel.__name__}: constexprs {list(constexprs)} are not its "
                               f"last parameters {kernel.arg_names[len(args):]}")
        _RESOLVED[memo] = kernel[grid](*args, **constexprs, num_warps=tile.num_warps,
                                       num_stages=tile.num_stages)
        return
    launch_grid = (*grid, 1, 1)
    compiled[launch_grid](*args, *constexprs.values())


def _on_device_of(tensor: Tensor) -> AbstractContextManager:
    """Triton launches on the current CUDA device and stream: make a real operand's device
    current (operands on cuda:1 while cuda:0 is current), as validation does."""
    if tensor.is_cuda and is_plain(tensor) and tensor.get_device() != torch.cuda.current_device():
        return torch.cuda.device(tensor.device)
    return nullcontext()
