"""CI gates over cold runs: compile budgets, baselines, the warm-cache check, and who
initialized CUDA in the pytest process. One concern per module."""
