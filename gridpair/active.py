"""Which selector the custom ops and the eager path consult: ``SELECTOR``, the process's
selector, unless a ``using_selector`` block routes its own thread or task elsewhere.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from gridpair.selector import LaunchSelector

SELECTOR = LaunchSelector(workers=None)
# Per thread and per asyncio task: a using_selector block routes only its own context's ops.
_active: ContextVar[LaunchSelector | None] = ContextVar("gridpair_active_selector", default=None)


def active_selector() -> LaunchSelector:
    """The selector the custom ops consult: ``SELECTOR`` unless ``using_selector`` says else."""
    selector = _active.get()
    return SELECTOR if selector is None else selector


@contextmanager
def using_selector(selector: LaunchSelector) -> Iterator[LaunchSelector]:
    """Route the custom ops' launch choices through ``selector`` for the block, in this thread
    or task only (for tests and experiments with other selection policies; the ops trace the
    same either way)."""
    token = _active.set(selector)
    try:
        yield selector
    finally:
        _active.reset(token)
