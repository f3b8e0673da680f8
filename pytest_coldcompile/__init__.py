"""pytest-coldcompile: run kernel regressions in processes that compiled nothing before."""
