"""Fixtures of the plugin's pytester tests."""

from __future__ import annotations

import pytest
from coldhelp import conftest


@pytest.fixture
def cold(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester with an (empty) conftest, for the plugin's subprocess runs."""
    pytester.makeconftest(conftest())
    return pytester
