"""`python -m gridpair explain`, as a user runs it on a machine with no GPU."""

import json
import os
import subprocess
import sys
import time

import pytest

from gridpair.__main__ import main as gridpair_main

ARGS = ["--shape", "300,49,2,288", "--frames", "3", "--grid", "584"]
# Where the production geometry is not the point: its candidates compile in a fraction of the time.
SMALL_ARGS = ["--shape", "2,16,2,16", "--frames", "1", "--grid", "32"]


def explain(*args, env=None):
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "gridpair", "explain", *args],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, **(env or {})})
    return run, time.perf_counter() - start


def test_json_decision_for_the_production_second_backward_on_a_99_kib_profile():
    run, seconds = explain("--op", "bwd2", "--dtype", "float32", *ARGS,
                           "--device", "rtx-pro-6000-blackwell", "--json")
    assert run.returncode == 0, run.stderr
    decision = json.loads(run.stdout)
    assert set(decision) == {"op", "device", "limit", "candidates", "admitted", "fallback"}
    assert decision["op"] == "bwd2"
    assert decision["limit"] == 101376
    assert decision["fallback"] is False
    outcomes = [c["outcome"] for c in decision["candidates"]]
    assert set(outcomes) <= {"fits", "out_of_resources", "cached"}
    assert outcomes[0] == "out_of_resources"
    assert outcomes[-1] == "fits"
    assert decision["candidates"][0]["shared"] > 101376
    assert decision["admitted"] == {k: decision["candidates"][-1][k] for k in ("config", "shared")}
    assert decision["admitted"]["shared"] <= 101376
    assert set(decision["admitted"]["config"]) >= {"block_rows", "block_grid", "num_stages",
                                                   "num_warps"}
    # How long it took is printed, not asserted: a wall-clock bound fails on a busy machine.
    print(f"explain took {seconds:.1f} s")


def test_table_and_fallback_under_a_cap():
    run, _ = explain("--op", "fwd", "--dtype", "bfloat16", *SMALL_ARGS, "--device", "h200",
                     env={"PYTEST_COLDCOMPILE_SMEM_LIMIT": "1024"})
    assert run.returncode == 0, run.stderr
    assert "per-block shared-memory limit: 1024 bytes" in run.stdout
    assert "out_of_resources" in run.stdout
    assert "admitted: none - the op computes with the reference composition" in run.stdout


def test_device_from_the_environment_and_every_candidate_with_all():
    run, _ = explain("--op", "fwd", "--dtype", "bfloat16", *ARGS, "--all", "--json",
                     env={"GRIDPAIR_DEVICE": "a100"})
    assert run.returncode == 0, run.stderr
    decision = json.loads(run.stdout)
    assert decision["device"].startswith("profile a100")
    assert len(decision["candidates"]) > 1
    assert decision["admitted"] is not None


@pytest.mark.parametrize(("args", "message"), [
    (["--op", "fwd", "--dtype", "float32", "--shape", "3,4", "--frames", "1", "--grid", "5"],
     "--shape: expected four positive N,D,F,KC"),
    (["--op", "fwd", "--dtype", "float32", "--shape", "3,4,1,6", "--frames", "4",
      "--grid", "5", "--device", "h200"],
     "--frames 4 does not divide the last axis of --shape (6)"),
    (["--op", "fwd", "--dtype", "float32", "--shape", "3,4,1,6", "--frames", "1",
      "--grid", "-2", "--device", "h200"], "argument --grid: expected a positive integer, got -2"),
    (["--op", "fwd", "--dtype", "float32", *ARGS, "--device", "h300"], "invalid choice"),
])
def test_bad_arguments_are_named(args, message, monkeypatch, capsys):
    # In this process: argparse refuses each before any device is looked up or any search runs;
    # the tests above run the command as a user does (a new interpreter: 4 s each on 2 cores).
    monkeypatch.setenv("GRIDPAIR_DEVICE", "")
    with pytest.raises(SystemExit) as exit_:
        gridpair_main(["explain", *args])
    stderr = capsys.readouterr().err
    assert exit_.value.code == 2, stderr  # argparse's usage error, whichever argument
    assert message in stderr
