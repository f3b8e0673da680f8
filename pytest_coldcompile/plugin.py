"""pytest hook implementations of pytest-coldcompile."""
