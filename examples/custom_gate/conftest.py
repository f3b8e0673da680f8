"""A gate of a downstream project: fail a cold test whose largest admitted launch needs more
shared memory than the ini key max_admitted_shared allows (0: no limit)."""
from toyselector import SELECTOR

import pytest_coldcompile

pytest_coldcompile.register_selector(SELECTOR)


def pytest_addoption(parser):
    parser.addini("max_admitted_shared", "bytes of shared memory a launch may admit", default="0")


def pytest_coldcompile_gate(item, record):
    limit = int(item.config.getini("max_admitted_shared"))
    shared = record["max_admitted_shared"]
    if limit and shared is not None and shared > limit:
        return f"admitted {shared} bytes of shared memory, over max_admitted_shared = {limit}"
    return None
