"""gridpair's Triton kernels run by Triton's interpreter inside this process, for the length of
a ``with interpreted_kernels():`` block.

``TRITON_INTERPRET=1`` only takes effect where ``@triton.jit`` decorates a function, at import;
a test process has long imported Triton and gridpair with compiled functions. This does what
that decoration does under the variable - ``InterpretedFunction(fn)`` of the same Python
function - for the three kernels gridpair launches (``kernels.KERNELS``) and for every
``@triton.jit`` function they call (gridpair's helpers, ``tl.zeros`` and the rest of
triton.language), and sets the variable for the block so that Triton's runtime behaves as it
does under the interpreter. Everything is restored afterwards, triton.language included: the
interpreter patches it for each call and, for calls made inside a kernel, leaves it patched
(harmless in a process that interprets everything, not in one that compiles too).
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager


def _language_namespaces() -> list[object]:
    """What Triton's interpreter patches: triton.language, its core and math, and the tensor,
    dtype and tensor-descriptor classes."""
    import triton.language as tl

    return [tl, tl.core, tl.math, tl.tensor, tl.dtype, tl.core.tensor_descriptor_base]


@contextmanager
def _restoring(namespaces: list[object]) -> Iterator[None]:
    saved = [(space, dict(vars(space))) for space in namespaces]
    try:
        yield
    finally:
        for space, attributes in saved:
            for name in [name for name in vars(space) if name not in attributes]:
                delattr(space, name)
            for name, value in attributes.items():
                if vars(space).get(name, value) is not value:
                    setattr(space, name, value)


@contextmanager
def interpreted_kernels() -> Iterator[None]:
    from triton.runtime import interpreter
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
        # A @triton.jit function called from an interpreted kernel runs interpreted too, as
        # InterpretedFunction.__call__ runs it, but undoing its patches when it returns.
        function = as_interpreted(self)
        rewrite = getattr(function, "rewrite", None)
        if rewrite is None:  # another Triton: its own call (the block's end restores)
            return function(*args, **kwargs)
        scope = interpreter._patch_lang(function.fn)
        try:
            return rewrite()(*args, **kwargs)
        except Exception as error:
            raise interpreter.InterpreterError(repr(error)) from error
        finally:
            scope.restore()

    table = dict(kernels.KERNELS)
    saved_env = os.environ.get("TRITON_INTERPRET")
    saved_call = JITFunction.__call__
    os.environ["TRITON_INTERPRET"] = "1"
    JITFunction.__call__ = call_interpreted
    try:
        kernels.KERNELS.update({op: as_interpreted(jit) for op, jit in table.items()})
        with _restoring(_language_namespaces()):
            yield
    finally:
        kernels.KERNELS.update(table)
        JITFunction.__call__ = saved_call
        if saved_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_env
