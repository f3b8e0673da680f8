"""gridpair: the fused Triton grid-pair operator and its validated launch selector.

``grid_pair`` is the operator, ``reference_grid_pair`` its einsum composition, ``SELECTOR`` the
launch selector of its three kernels (the pytest-coldcompile selector protocol, duck-typed:
gridpair imports neither pytest nor the plugin), and
``gridpair.devices.PROFILES`` the device profiles validation can target without a GPU.

A launch goes down the modules once: ``api`` -> ``inputs`` -> ``eager`` (or ``ops``, traced) ->
``autograd`` -> ``active`` -> ``selector`` -> ``signature`` -> (a cold decision: ``ladder``,
``pool``, ``validation``) -> ``launch`` -> ``kernels``; docs/gridpair-internals.md walks it.
"""

import torch

from gridpair import _versions

# gridpair uses private torch and Triton internals: refuse an untested release by name.
_versions.require("torch", torch.__version__)
try:
    import triton
except ImportError:  # no Triton (not Linux): the reference composition only
    pass
else:
    _versions.require("triton", triton.__version__)

from gridpair import devices  # noqa: E402
from gridpair.active import SELECTOR  # noqa: E402
from gridpair.api import grid_pair  # noqa: E402
from gridpair.events import LaunchEvent  # noqa: E402
from gridpair.reference import reference_grid_pair  # noqa: E402

__all__ = ["SELECTOR", "LaunchEvent", "devices", "grid_pair", "reference_grid_pair"]
