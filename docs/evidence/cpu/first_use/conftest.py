"""A stand-in for Triton's interpreter tests (python/test/unit/language under TRITON_INTERPRET=1):
tiny @triton.jit kernels run by the interpreter, plus a few pure-Python tests.

With FIRST_USE_PROFILE=DIR, each test's call phase is profiled (cProfile) into DIR/<test>.prof.
"""

import cProfile
import os
import re

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    out = os.environ.get("FIRST_USE_PROFILE")
    if not out:
        return (yield)
    profile = cProfile.Profile()
    profile.enable()
    try:
        return (yield)
    finally:
        profile.disable()
        os.makedirs(out, exist_ok=True)
        profile.dump_stats(os.path.join(out, re.sub(r"[^\w.-]+", "_", item.nodeid) + ".prof"))
