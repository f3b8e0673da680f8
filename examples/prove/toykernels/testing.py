"""Test helpers of toykernels: the bug, brought back on demand, and a warm-up that hides it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from toykernels.launch import SELECTOR, kernel_sum


@contextlib.contextmanager
def trusting_selector() -> Iterator[None]:
    """The retry loop as it was before the fix: it trusts a launch that did not fail."""
    SELECTOR.trust_trace = True
    try:
        yield
    finally:
        SELECTOR.trust_trace = False


def eager_warm_up() -> None:
    """An eager call first: its real launches teach the retry loop a tile that fits."""
    kernel_sum([1.0, 2.0, 3.0])
