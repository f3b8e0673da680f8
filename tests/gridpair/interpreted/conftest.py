"""Every test here runs gridpair's kernels under Triton's interpreter, in this process
(``interpreted_kernels``): they are ordinary tests of the suite, on CPU tensors."""

import pytest
from interpreted_kernels import interpreted_kernels


@pytest.fixture(autouse=True)
def _interpreted_kernels():
    with interpreted_kernels():
        yield
