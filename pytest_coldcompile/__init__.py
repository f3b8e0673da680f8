"""pytest-coldcompile: run kernel regressions in processes that compiled nothing before.

Public API for downstream projects: register a launch selector, read its events. Importing
this package is cheap: it never imports torch or triton.
"""

from pytest_coldcompile.selectors import ENTRY_POINT_GROUP, LaunchEvent, register_selector
from pytest_coldcompile.smem_cap import SMEM_LIMIT_ENV

__all__ = ["ENTRY_POINT_GROUP", "SMEM_LIMIT_ENV", "LaunchEvent", "register_selector"]
