pytest_plugins = ["pytester"]


def pytest_collection_modifyitems(items):
    """The cold force-step regressions take minutes each on a 2-core CPU: start them first, so
    that under ``-n auto`` they spread over the workers instead of ending the run on one."""
    items.sort(key=lambda item: "tests/regressions/" not in item.nodeid)
