"""gridpair's Triton kernels run by Triton's interpreter inside this process, for the length of
a ``with interpreted_kernels():`` block.

``TRITON_INTERPRET=1`` only takes effect where ``@triton.jit`` decorates a function, at import;
a test process has long imported Triton and gridpair with compiled functions. This does what
that decoration does under the variable - ``InterpretedFunction(fn)`` of the same Python
function - for the three kernels gridpair launches (``kernels.KERNELS``) and for every
``@triton.jit`` function they call (gridpair's helpers, ``tl.zeros`` and the rest of
triton.language), and sets the variable for the block so that Triton's runtime behaves as it
does under the interpreter. Everything is restored afterwards.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def interpreted_kernels() -> Iterator[None]:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from gridpair import kernels, pool

    # The interpreter patches triton.language while a kernel runs: no validation compile of a
    # selector's worker threads may run meanwhile.
    for owner in list(pool._OWNERS):
        owner.idle()
    interpreted: dict[int, tuple[object, InterpretedFunction]] = {}

    def as_interpreted(jit: JITFunction) -> InterpretedFunction:
        if id(jit) not in interpreted:
            interpreted[id(jit)] = (jit, InterpretedFunction(jit.fn))
        return interpreted[id(jit)][1]

    def call_interpreted(self: JITFunction, *args: object, **kwargs: object) -> object:
        # A @triton.jit function called from an interpreted kernel runs interpreted too.
        return as_interpreted(self)(*args, **kwargs)

    table = dict(kernels.KERNELS)
    saved_env = os.environ.get("TRITON_INTERPRET")
    saved_call = JITFunction.__call__
    os.environ["TRITON_INTERPRET"] = "1"
    JITFunction.__call__ = call_interpreted
    try:
        kernels.KERNELS.update({op: as_interpreted(jit) for op, jit in table.items()})
        yield
    finally:
        kernels.KERNELS.update(table)
        JITFunction.__call__ = saved_call
        if saved_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_env
