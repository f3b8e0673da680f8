"""The benchmark tools' tests share gridpair's test helpers (``interpreted_kernels``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gridpair"))
