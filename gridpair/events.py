"""What the launch selector tells its listeners: the event record and its outcomes.

The record is duck-typed to the pytest-coldcompile selector protocol (``kind``, ``op``,
``config``, ``resources``, ``outcome``, plus the ``selector``, ``device`` and ``seconds`` the
plugin copies when present); gridpair defines it itself so that it imports nothing of the plugin.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Event kinds (fixed by the protocol).
PROBE = "probe"
ADMIT = "admit"
FALLBACK = "fallback"

# Outcomes: a candidate fits or not, a decision is served from the cache, or the dtype has no
# fused kernel.
FITS = "fits"
OUT_OF_RESOURCES = "out_of_resources"
CACHED = "cached"
UNSUPPORTED = "unsupported_dtype"


@dataclass(frozen=True)
class LaunchEvent:
    """One probe, admit or fallback of the selector.

    ``seconds``: on a probe its compile time, on an admit or fallback how long the caller
    waited for that decision (None where unknown).
    """

    kind: str
    op: str
    config: Mapping[str, Any] = field(default_factory=dict)
    resources: Mapping[str, Any] = field(default_factory=dict)
    outcome: str = ""
    selector: str = ""
    device: str = ""
    seconds: float | None = None
