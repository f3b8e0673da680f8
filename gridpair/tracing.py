"""Real or traced: whether a tensor has real storage, whether a launch's operands are rounded
as they load (real) or cast first (traced), and whether a call may take the eager path - real
tensors that nothing traces, on a device the fused kernels run on. Asked by every layer.
"""

from collections.abc import Sequence

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from gridpair.kernels import KERNELS

_PLAIN = (torch.Tensor, torch.nn.Parameter)


def is_plain(tensor: Tensor) -> bool:
    """A tensor with real storage: fake and functional tensors have no data pointer."""
    return type(tensor) in _PLAIN and not tensor.is_meta


def rounds_on_load(operands: Sequence[Tensor]) -> bool:
    """Whether a launch hands these operands to the kernel in their own dtypes, to be rounded
    to the compute dtype as they are loaded (real tensors), rather than cast first (traced
    ones): ``signature.Signature.rounded_on_load``."""
    return all(is_plain(x) for x in operands)


def nothing_traces(tensors: Sequence[Tensor], anywhere: bool = False) -> bool:
    """Whether a call on ``tensors`` may take the eager path: real tensors on a device the
    kernels run on (on any device with ``anywhere``), and no compiler, tracer, transform or
    mode that must see the custom ops."""
    if torch.compiler.is_compiling() or torch._C._get_tracing_state() is not None:
        return False
    if _get_current_dispatch_mode() is not None or torch._C._is_torch_function_mode_enabled():
        return False
    if torch._C._functorch.peek_interpreter_stack() is not None:
        return False
    if not all(is_plain(t) for t in tensors):
        return False
    return anywhere or kernels_run_on(tensors[0].device)


def interpreted() -> bool:
    """Under TRITON_INTERPRET=1 kernels are interpreter functions (which wrap_triton refuses)
    that run on CPU tensors."""
    return type(KERNELS["fwd"]).__name__ == "InterpretedFunction"


def kernels_run_on(device: torch.device) -> bool:
    """Whether the fused kernels can run on ``device``: CUDA, or the CPU under Triton's
    interpreter."""
    return device.type == "cuda" or (device.type == "cpu" and interpreted())
