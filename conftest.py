import atexit
import os
import shutil
import tempfile

from pytest_coldcompile.child.pristine import HEADER_DIR_ENV

pytest_plugins = ["pytester"]

# One directory of Inductor's precompiled C++ header for the whole run: the xdist workers and
# every pytester session the plugin's tests start inherit it, so a 2-core machine builds the
# header once rather than once per worker and per inner session (docs/design.md, "What cold
# children share"). Kernel artifacts stay private to each test.
# Set at import, before the plugin forks its zygote or xdist starts its workers; the process
# that made it removes it.
if not os.environ.get(HEADER_DIR_ENV):
    _headers = tempfile.mkdtemp(prefix="coldcompile-headers-")
    os.environ[HEADER_DIR_ENV] = _headers
    atexit.register(shutil.rmtree, _headers, ignore_errors=True)


def pytest_collection_modifyitems(items):
    """The cold force-step regressions take minutes each on a 2-core CPU: start them first, so
    that under ``-n auto`` they spread over the workers instead of ending the run on one."""
    items.sort(key=lambda item: "tests/regressions/" not in item.nodeid)
