"""What the reports say about proofs: each proof item's ``cold_compile.proof.*`` properties
are the ``proof`` object of its JSON record (``record.from_properties``), and the terminal
summary lists every proof with its verdict.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

VERDICT_ORDER = ("caught", "vacuous", "missed", "broken", "unproven", "invalid", "error",
                 "skipped")


def proofs(tests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """nodeid -> proof object, for the records that are proofs."""
    return {nodeid: t["proof"] for nodeid, t in tests.items() if t.get("proof")}


def title(found: dict[str, dict[str, Any]]) -> str:
    counts = Counter(str(p.get("verdict") or "?") for p in found.values())
    ordered = sorted(counts, key=lambda v: (VERDICT_ORDER.index(v) if v in VERDICT_ORDER
                                            else len(VERDICT_ORDER), v))
    return "cold compile proofs: " + ", ".join(f"{counts[v]} {v}" for v in ordered)


def lines(found: dict[str, dict[str, Any]]) -> list[str]:
    """One line per proof: verdict, node id, what showed it."""
    width = max((len(str(p.get("verdict") or "?")) for p in found.values()), default=0)
    out = []
    for nodeid, p in sorted(found.items()):
        verdict = str(p.get("verdict") or "?")
        if p.get("exception"):
            what = f"{p['exception']}"
            if p.get("location"):
                what += f" at {p['location']}"
        elif verdict == "missed":
            what = "passed with the bug active"
        else:
            what = str(p.get("message") or "")
        if p.get("masked"):
            what += f"; warm leg: {p['masked']}"
        out.append(f"{verdict.ljust(width)}  {nodeid}  {what}".rstrip())
    return out
