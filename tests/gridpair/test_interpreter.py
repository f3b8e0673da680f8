"""Runs tests/gridpair/interpreted under Triton's interpreter in a subprocess: TRITON_INTERPRET
must be set before triton is imported, which this process has already done."""

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_triton_kernels_under_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         str(HERE / "interpreted")],
        cwd=HERE.parent.parent, env=env, capture_output=True, text=True, timeout=900,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 58, summary
    assert "skipped" not in summary and "failed" not in summary, summary
