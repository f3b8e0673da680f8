import pytest
from toyselector import SELECTOR


@pytest.mark.cold_compile
def test_small_tile():
    SELECTOR.admit("blocked_sum", tile=64, shared=49152)


@pytest.mark.cold_compile
def test_large_tile():
    SELECTOR.admit("blocked_sum", tile=128, shared=98304)
