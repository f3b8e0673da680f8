"""Input checks of the public grid-pair functions and ops: every error names the argument and
what was expected, and nothing is coerced (no dtype promotion, no device moves, no reshapes).
``grid_pair``, ``reference_grid_pair`` and ``torch.ops.gridpair.*`` share ``check_inputs``."""

from collections.abc import Mapping

import torch
from torch import Tensor

_PROJECTORS = ("to_grid", "from_grid")


def check_operands(
    left: Tensor, right: Tensor, to_grid: Tensor, from_grid: Tensor, n_frames: int
) -> None:
    """Raise TypeError/ValueError naming the first argument that does not fit the operator."""
    check_inputs({"left": left, "right": right}, to_grid, from_grid, n_frames)


def check_inputs(operands: Mapping[str, Tensor], to_grid: Tensor, from_grid: Tensor,
                 n_frames: int, *, compute_dtype: object = None, where: str = "") -> None:
    """Check (N, D, F, K*C) ``operands`` (named, the first one setting the shape and device)
    with their (G, D*K) projectors and ``n_frames``; errors start with ``where``.

    Without ``compute_dtype`` every tensor has the first operand's dtype. With it (the ops'
    mixed-precision form, which autocast uses) the projectors have ``compute_dtype`` and each
    operand either ``compute_dtype`` or float32, read and rounded to ``compute_dtype``."""
    args = {**operands, "to_grid": to_grid, "from_grid": from_grid}
    first, *others = operands
    for name, value in args.items():
        if not isinstance(value, Tensor):
            raise TypeError(f"{where}{name}: expected a torch.Tensor, got {type(value).__name__}")
    if isinstance(n_frames, bool) or not isinstance(n_frames, int):
        raise TypeError(f"{where}n_frames: expected an int, got {type(n_frames).__name__}")
    if n_frames < 1:
        raise ValueError(f"{where}n_frames: expected n_frames >= 1, got {n_frames}")

    lead = operands[first]
    if lead.dim() != 4:
        raise ValueError(f"{where}{first}: expected a 4-d tensor (N, D, F, K*C), "
                         f"got shape {tuple(lead.shape)}")
    for name in others:
        if operands[name].shape != lead.shape:
            raise ValueError(f"{where}{name}: expected the shape of {first} "
                             f"{tuple(lead.shape)}, got {tuple(operands[name].shape)}")
    degrees, packed = lead.shape[1], lead.shape[3]
    if packed % n_frames:
        raise ValueError(f"{where}n_frames: expected a divisor of the last axis of {first} "
                         f"({packed} = K*C), got {n_frames}")
    slots = degrees * n_frames
    if to_grid.dim() != 2:
        raise ValueError(f"{where}to_grid: expected a 2-d tensor (G, D*K), "
                         f"got shape {tuple(to_grid.shape)}")
    if to_grid.shape[1] != slots:
        raise ValueError(f"{where}to_grid: expected width D*K = {slots} (D = {degrees} from "
                         f"{first}, K = {n_frames}), got shape {tuple(to_grid.shape)}")
    if from_grid.shape != to_grid.shape:
        raise ValueError(f"{where}from_grid: expected the shape of to_grid "
                         f"{tuple(to_grid.shape)}, got {tuple(from_grid.shape)}")

    for name, value in args.items():
        if not value.dtype.is_floating_point:
            raise TypeError(f"{where}{name}: expected a floating-point dtype, got {value.dtype}")
    if compute_dtype is None:
        for name in (*others, *_PROJECTORS):
            if args[name].dtype != lead.dtype:
                raise TypeError(f"{where}{name}: expected dtype {lead.dtype} (the dtype of "
                                f"{first}), got {args[name].dtype}")
    else:
        if not isinstance(compute_dtype, torch.dtype) or not compute_dtype.is_floating_point:
            raise TypeError(f"{where}compute_dtype: expected a floating-point torch.dtype or "
                            f"None, got {compute_dtype!r}")
        for name in _PROJECTORS:
            if args[name].dtype != compute_dtype:
                raise TypeError(f"{where}{name}: expected dtype {compute_dtype} (the "
                                f"compute_dtype), got {args[name].dtype}")
        for name in operands:
            if args[name].dtype not in (compute_dtype, torch.float32):
                raise TypeError(f"{where}{name}: expected dtype {compute_dtype} (the "
                                f"compute_dtype) or torch.float32, got {args[name].dtype}")
    for name in (*others, *_PROJECTORS):
        if args[name].device != lead.device:
            raise ValueError(f"{where}{name}: expected device {lead.device} (the device of "
                             f"{first}), got {args[name].device}")


def check_constant_projectors(to_grid: Tensor, from_grid: Tensor, *, where: str = "") -> None:
    """The fused operator computes no projector gradient: refuse projectors that want one
    (errors start with ``where``), rather than leave them silently without a gradient."""
    for name, value in (("to_grid", to_grid), ("from_grid", from_grid)):
        if value.requires_grad:
            raise ValueError(
                f"{where}{name}: expected a constant projector (requires_grad=False); grid_pair "
                "computes no gradient for projectors - detach it or register it as a buffer, "
                "or use reference_grid_pair"
            )
