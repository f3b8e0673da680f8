"""gridpair: the fused Triton grid-pair operator and its validated launch selector.

``grid_pair`` is the operator, ``reference_grid_pair`` its einsum composition, ``SELECTOR`` the
launch selector of its three kernels (the pytest-coldcompile selector protocol), and
``gridpair.devices.PROFILES`` the device profiles validation can target without a GPU.
"""

from gridpair import devices
from gridpair.api import grid_pair
from gridpair.reference import reference_grid_pair
from gridpair.selector import SELECTOR, LaunchEvent

__all__ = ["SELECTOR", "LaunchEvent", "devices", "grid_pair", "reference_grid_pair"]
