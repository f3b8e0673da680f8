"""A toy kernel library with the bug pytest-coldcompile's prove mode is for: a launch retry
loop that trusts a successful trace."""

from toykernels.launch import SELECTOR, OutOfResources, kernel_sum, toy_compile

__all__ = ["SELECTOR", "OutOfResources", "kernel_sum", "toy_compile"]
