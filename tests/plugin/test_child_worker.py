"""Under pytest-xdist every kind of cold child knows its worker as a forked one does:
``worker_id``, ``config.workerinput`` and PYTEST_XDIST_WORKER agree."""

from __future__ import annotations

import pytest
from coldhelp import needs_fork, run

pytestmark = needs_fork

WORKER_TESTS = """
import os, pytest

@pytest.mark.parametrize("n", range(4))
def test_worker(n, worker_id, testrun_uid, request, cold_state):
    assert cold_state.cold
    workerinput = request.config.workerinput
    assert worker_id == workerinput["workerid"] == os.environ["PYTEST_XDIST_WORKER"]
    assert worker_id.startswith("gw") and worker_id != "master"
    assert workerinput["workercount"] == 2
    assert testrun_uid == workerinput["testrunuid"]
    print(f"WORKER {n} {worker_id} {testrun_uid}")
"""


@pytest.mark.parametrize("mode", ["fork", "zygote", "spawn"])
def test_worker_id_agrees_in_every_mode(cold: pytest.Pytester, mode: str) -> None:
    pytest.importorskip("xdist")
    cold.makepyfile(test_workers=WORKER_TESTS)
    result = run(cold, "-n", "2", "--cold-compile", f"--cold-compile-mode={mode}", "-rP")
    result.assert_outcomes(passed=4)
    seen = [line.split()[1:] for line in result.stdout.lines if line.startswith("WORKER ")]
    assert len(seen) == 4
    assert len({uid for _, _, uid in seen}) == 1  # one test run, whatever the child


def test_outside_xdist_a_cold_child_is_master(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("mode", ["x"])
        def test_master(mode, worker_id, request):
            assert worker_id == "master"
            assert not hasattr(request.config, "workerinput")
        """
    )
    for mode in ("fork", "zygote", "spawn"):
        run(cold, "--cold-compile", f"--cold-compile-mode={mode}").assert_outcomes(passed=1)
