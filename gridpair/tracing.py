"""Whether a call may take the eager path: real tensors that nothing traces (no compiler,
tracer, transform or mode that must see the custom ops), on a device the fused kernels run on.
"""

from collections.abc import Sequence

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from gridpair.kernels import KERNELS
from gridpair.signature import is_plain


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
