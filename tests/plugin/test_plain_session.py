"""What a session that runs no cold test pays for the plugin (docs/plugin.md, "What every
session pays"): the zygote forked before its conftests waits idle and is ended as it is."""

from __future__ import annotations

import pytest
from coldhelp import modules_importable_by_name, needs_fork, run

pytestmark = needs_fork

# Loaded with -p, before the zygote forks: every fork of the plugin's fork servers, the
# zygote's own and any it makes, is written down.
FORK_LOG = """
import os
from pytest_coldcompile.isolation import pipes

_fork = pipes.fork


def logged_fork():
    pid = _fork()
    if pid:
        with open(os.environ["FORK_LOG"], "a") as log:
            log.write(f"{os.getpid()} forked {pid}\\n")
    return pid


pipes.fork = logged_fork
"""


def test_the_idle_zygote_of_a_session_without_cold_tests_forks_nothing(
    pytester: pytest.Pytester,
) -> None:
    log = pytester.path / "forks.log"
    pytester._monkeypatch.setenv("FORK_LOG", str(log))
    pytester.makepyfile(fork_log=FORK_LOG, test_plain="def test_plain():\n    pass\n")
    modules_importable_by_name(pytester)
    result = run(pytester, "-p", "fork_log", "test_plain.py")
    result.assert_outcomes(passed=1)
    forks = log.read_text().splitlines()
    assert len(forks) == 1, forks  # the zygote itself, from the pytest process
