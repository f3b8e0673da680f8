"""Fixtures of the plugin's pytester tests."""

from __future__ import annotations

import pytest
from coldhelp import conftest


@pytest.fixture
def cold(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester whose conftest hides the gridpair selector (see coldhelp)."""
    pytester.makeconftest(conftest())
    return pytester
