"""A toy kernel library: ``blocked_sum`` picks its tile with a launch selector, and
``compile`` traces a function first and runs it later, as ``torch.compile`` does.

Set ``TOYKERNELS_SELECTION=trial`` to bring back the bug the cold regression catches: the
selector then trusts a trace, which loads no kernel, so its retry loop cannot fail there.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

from toykernels.launch import SELECTOR

__all__ = ["SELECTOR", "blocked_sum", "compile"]

_TRACE: contextvars.ContextVar[list | None] = contextvars.ContextVar("trace", default=None)


def blocked_sum(values: list[float]) -> float:
    """The sum of values, in blocks of the selected tile."""
    trace = _TRACE.get()
    kernel = SELECTOR.choose("blocked_sum", tracing=trace is not None)
    if trace is not None:  # tracing: record the launch, load and run nothing
        trace.append(kernel)
        return 0.0
    return kernel.run(values)


def compile(fn: Callable[[list[float]], float]) -> Callable[[list[float]], float]:
    """Trace fn once (no kernel loads), then replay the kernels it recorded on each call."""
    recorded: list = []
    token = _TRACE.set(recorded)
    try:
        fn([0.0])
    finally:
        _TRACE.reset(token)
    kernel = recorded[0]
    return kernel.run
