"""pytest-coldcompile: run kernel regressions in processes that compiled nothing before.

Public API for downstream projects: register a launch selector, read its events. Importing
this package is cheap: it never imports torch or triton.
"""

from pytest_coldcompile.protocol import ENTRY_POINT_GROUP, SMEM_LIMIT_ENV, LaunchEvent
from pytest_coldcompile.selectors import register_selector

__all__ = ["ENTRY_POINT_GROUP", "SMEM_LIMIT_ENV", "LaunchEvent", "register_selector"]
