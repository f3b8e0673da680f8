"""A cold test's record: the fields every cold test reports (the JSON report's keys), and how
they travel on the teardown report's user properties, so that an xdist controller gets them.

The fields are part of the public contract (docs/report-schema.md): the engine fills the
figures, features add their own keys through the plugin's hooks (``hookspecs``).
"""

from __future__ import annotations

from typing import Any

PREFIX = "cold_compile."
"""Prefix of a record's user properties on the teardown report."""
TIMINGS = ("selection_s", "tracing_s", "inductor_s", "compile_s")
"""The compile-time breakdown: selection (launch validation), tracing (Dynamo, AOTAutograd),
Inductor, and their compile-window total; ``total_s`` is the child's wall time."""
FIGURES = (
    *TIMINGS,
    "frames",
    "forward_graphs",
    "backward_graphs",
    "probed",
    "admitted",
    "fallback",
    "max_admitted_shared",
    "warmed_ahead",
    "cuda_ahead",
)
DEVICE_KEYS = ("smem_limit", "smem_device", "emulated_device", "emulation")
"""The device a cold test ran as: its shared-memory cap in bytes, the named device that cap is
(if one's), the emulated device, and the emulation's kernels (``devices.emulate``)."""
RECORD_KEYS = ("mode", "mode_reason", "total_s", *FIGURES, "selectors", "launches",
               *DEVICE_KEYS)
"""The keys of every test's record in the JSON report, besides its outcome."""
GATE_KEYS = ("budget_s", "budget_exceeded", "warm", "baseline", "masker")
"""The CI gates' keys of every record (docs/ci-gates.md), null where a gate is off."""


def properties(
    mode: str, reason: str, summary: dict[str, Any] | None, total_s: float | None = None
) -> list[tuple[str, Any]]:
    """The user properties a cold test's teardown report carries; total_s: the child's wall
    time, start included (None when it never ran)."""
    return as_properties(fields(mode, reason, summary, total_s))


def as_properties(record: dict[str, Any]) -> list[tuple[str, Any]]:
    """A record's fields as user properties (``from_properties`` reads them back)."""
    return [(PREFIX + key, value) for key, value in record.items()]


def fields(
    mode: str, reason: str, summary: dict[str, Any] | None, total_s: float | None = None
) -> dict[str, Any]:
    """The record's engine-made fields, from the child's summary (None: it recorded none)."""
    out: dict[str, Any] = {"mode": mode, "mode_reason": reason}
    if total_s is not None:
        out["total_s"] = round(float(total_s), 3)
    if summary:
        out.update((key, summary.get(key)) for key in FIGURES)
        if summary.get("selectors"):
            out["selectors"] = ",".join(summary["selectors"])
        if summary.get("launches") is not None:
            out["launches"] = summary["launches"]
        out.update((key, summary[key]) for key in DEVICE_KEYS if summary.get(key) is not None)
    return out


def from_properties(user_properties: list[tuple[str, Any]]) -> dict[str, Any]:
    """The record's fields carried by a report's user properties; a dotted key ("proof.verdict")
    becomes a field of an object ("proof": {"verdict": ...})."""
    out: dict[str, Any] = {}
    for name, value in user_properties:
        if not (isinstance(name, str) and name.startswith(PREFIX)):
            continue
        key = name[len(PREFIX):]
        group, dot, sub = key.partition(".")
        if dot:
            nested = out.setdefault(group, {})
            if isinstance(nested, dict):
                nested[sub] = value
        else:
            out[key] = value
    return out
