"""pytest-coldcompile: run kernel regressions in processes that compiled nothing before.

Public API for downstream projects: register a launch selector, read its events. Importing
this package is cheap: it never imports torch or triton (nor pytest: a library may import it
outside a test run; gridpair never does, its selector is duck-typed).
"""

import sys

from pytest_coldcompile import versions
from pytest_coldcompile.protocol import ENTRY_POINT_GROUP, SMEM_LIMIT_ENV, LaunchEvent
from pytest_coldcompile.selectors import register_selector

# The plugin uses private pytest internals (capture, setup state, the option parser): under
# pytest an unsupported release is a usage error naming it (pytest prints it and exits 4).
if "pytest" in sys.modules:
    versions.require("pytest", sys.modules["pytest"].__version__, sys.modules["pytest"].UsageError)

__all__ = ["ENTRY_POINT_GROUP", "SMEM_LIMIT_ENV", "LaunchEvent", "register_selector"]
