"""Loading the plugin by hand, as docs/plugin.md says to with plugin autoload off: every mode's
cold child loads it once, whichever name the user gave it."""

from __future__ import annotations

import pytest
from coldhelp import LIGHT_PRELOAD, needs_fork, run

pytestmark = needs_fork

COLD = """
import pytest

@pytest.mark.cold_compile
def test_cold(cold_state):
    assert cold_state.cold and cold_state.mode == {mode!r}
"""


@pytest.mark.parametrize("name", ["coldcompile", "pytest_coldcompile.plugin"])
@pytest.mark.parametrize("mode", ["fork", "zygote", "spawn"])
def test_a_plugin_loaded_with_p_and_autoload_off_runs_cold_tests(
    cold: pytest.Pytester, mode: str, name: str
) -> None:
    # The entry point's name and the module's name register the same module under two names;
    # a child that got both would refuse to start.
    cold._monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    cold.makepyfile(COLD.format(mode=mode))
    result = run(cold, "-p", name, f"--cold-compile-mode={mode}", *LIGHT_PRELOAD)
    result.assert_outcomes(passed=1)
