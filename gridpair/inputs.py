"""Input checks of the public grid-pair functions: every error names the argument and what was
expected, and nothing is coerced (no dtype promotion, no device moves, no reshapes)."""

from torch import Tensor

_PROJECTORS = ("to_grid", "from_grid")


def check_operands(
    left: Tensor, right: Tensor, to_grid: Tensor, from_grid: Tensor, n_frames: int
) -> None:
    """Raise TypeError/ValueError naming the first argument that does not fit the operator."""
    args = {"left": left, "right": right, "to_grid": to_grid, "from_grid": from_grid}
    for name, value in args.items():
        if not isinstance(value, Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    if isinstance(n_frames, bool) or not isinstance(n_frames, int):
        raise TypeError(f"n_frames: expected an int, got {type(n_frames).__name__}")
    if n_frames < 1:
        raise ValueError(f"n_frames: expected n_frames >= 1, got {n_frames}")

    if left.dim() != 4:
        raise ValueError(
            f"left: expected a 4-d tensor (N, D, F, K*C), got shape {tuple(left.shape)}"
        )
    if right.shape != left.shape:
        raise ValueError(
            f"right: expected the shape of left {tuple(left.shape)}, got {tuple(right.shape)}"
        )
    degrees, packed = left.shape[1], left.shape[3]
    if packed % n_frames:
        raise ValueError(
            f"n_frames: expected a divisor of the last axis of left ({packed} = K*C), "
            f"got {n_frames}"
        )
    slots = degrees * n_frames
    if to_grid.dim() != 2:
        raise ValueError(
            f"to_grid: expected a 2-d tensor (G, D*K), got shape {tuple(to_grid.shape)}"
        )
    if to_grid.shape[1] != slots:
        raise ValueError(
            f"to_grid: expected width D*K = {slots} (D = {degrees} from left, K = {n_frames}), "
            f"got shape {tuple(to_grid.shape)}"
        )
    if from_grid.shape != to_grid.shape:
        raise ValueError(
            f"from_grid: expected the shape of to_grid {tuple(to_grid.shape)}, "
            f"got {tuple(from_grid.shape)}"
        )

    for name, value in args.items():
        if not value.dtype.is_floating_point:
            raise TypeError(f"{name}: expected a floating-point dtype, got {value.dtype}")
    for name in ("right", *_PROJECTORS):
        if args[name].dtype != left.dtype:
            raise TypeError(
                f"{name}: expected dtype {left.dtype} (the dtype of left), got {args[name].dtype}"
            )
    for name in ("right", *_PROJECTORS):
        if args[name].device != left.device:
            raise ValueError(
                f"{name}: expected device {left.device} (the device of left), "
                f"got {args[name].device}"
            )


def check_constant_projectors(to_grid: Tensor, from_grid: Tensor) -> None:
    """The fused operator computes no projector gradient: refuse projectors that want one."""
    for name, value in (("to_grid", to_grid), ("from_grid", from_grid)):
        if value.requires_grad:
            raise ValueError(
                f"{name}: expected a constant projector (requires_grad=False); grid_pair "
                "computes no gradient for projectors - detach it or register it as a buffer, "
                "or use reference_grid_pair"
            )
