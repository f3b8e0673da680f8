"""The selector protocol's shared vocabulary: the event record, its kinds, the entry-point
group and the shared-memory cap's environment variable.

Launch selectors (gridpair's among them) import this module alone: it imports nothing beyond
the standard library, neither pytest nor torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ENTRY_POINT_GROUP = "pytest_coldcompile.selectors"

SMEM_LIMIT_ENV = "PYTEST_COLDCOMPILE_SMEM_LIMIT"
"""Set to the cap in bytes while one is active, for selectors that compile for a device profile
(no GPU to cap); on a GPU the cap reaches them through Triton's own limits."""

KINDS = {"probe": "probed", "admit": "admitted", "fallback": "fallback"}
"""Event kind -> the name of the list that holds such events."""


@dataclass(frozen=True)
class LaunchEvent:
    """One probe, admit or fallback decision of a launch selector.

    ``kind``, ``op``, ``config``, ``resources`` and ``outcome`` are the protocol; ``selector``
    names the selector that emitted it, ``device`` what it validated for, and ``seconds``: on
    a probe its compile time, on an admit or fallback how long the caller waited for that
    decision (None where unknown); only the latter feeds the cold report's selection time.
    """

    kind: str
    op: str
    config: Mapping[str, Any] = field(default_factory=dict)
    resources: Mapping[str, Any] = field(default_factory=dict)
    outcome: str = ""
    selector: str = ""
    device: str = ""
    seconds: float | None = None

    @classmethod
    def from_event(cls, event: Any, selector: str = "") -> LaunchEvent:
        """A copy of any protocol event: a selector may reuse or mutate its event objects."""
        seconds = getattr(event, "seconds", None)
        return cls(
            kind=str(getattr(event, "kind", "")),
            op=str(getattr(event, "op", "")),
            config=dict(getattr(event, "config", None) or {}),
            resources=dict(getattr(event, "resources", None) or {}),
            outcome=str(getattr(event, "outcome", "")),
            selector=selector or str(getattr(event, "selector", "") or ""),
            device=str(getattr(event, "device", "") or ""),
            seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
        )
