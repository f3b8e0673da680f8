"""gridpair is a kernel library: importing it, and running its operator, loads neither pytest
nor the pytest-coldcompile plugin (the selector protocol is duck-typed)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gridpair_imports_neither_pytest_nor_the_plugin(tmp_path):
    code = """
        import sys
        import torch
        import gridpair
        x = torch.randn(2, 4, 1, 6, dtype=torch.float64)
        t = torch.randn(5, 12, dtype=torch.float64)
        gridpair.grid_pair(x, x, t, t, 3).sum()
        loaded = sorted(m for m in sys.modules
                        if m.split(".")[0] in ("pytest", "_pytest", "pytest_coldcompile"))
        print("loaded:", loaded)
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "loaded: []" in run.stdout, run.stdout
