"""Fixtures of the plugin's pytester tests."""

from __future__ import annotations

import pytest
from coldhelp import conftest


@pytest.fixture
def cold(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester with an (empty) conftest, for the plugin's subprocess runs."""
    pytester.makeconftest(conftest())
    return pytester


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """When this suite itself runs under xdist, its workers' variables would make every inner
    pytest run look like worker gwK to the plugin (GPU assignment, worker_id); the runs these
    tests start are plain unless they pass -n themselves."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
