"""An item's fingerprint: what a re-collecting child compares with the parent's item before it
runs one under the same node id (the parent computes it, the child checks it).
"""

from __future__ import annotations

import io
import re
from typing import Any

import pytest

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")

def _stable_repr(value: Any, depth: int = 0) -> str:
    """A repr two processes agree on for the same parameter: no addresses, sets sorted."""
    if depth < 4 and isinstance(value, (set, frozenset)):
        inner = sorted(_stable_repr(v, depth + 1) for v in value)
        return f"{type(value).__name__}({{{', '.join(inner)}}})"
    if depth < 4 and isinstance(value, (list, tuple)):
        return f"{type(value).__name__}({', '.join(_stable_repr(v, depth + 1) for v in value)})"
    if depth < 4 and isinstance(value, dict):
        items = (
            f"{_stable_repr(k, depth + 1)}: {_stable_repr(v, depth + 1)}" for k, v in value.items()
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(value, io.IOBase):
        # A stream's repr names its file descriptor, which differs between processes (a
        # parameter sys.stdout is a capture file, or the zygote child's own stdout); a file
        # opened by path is told by its path.
        name = getattr(value, "name", None)
        path = f" {name!r}" if isinstance(name, str) and not name.startswith("<") else ""
        return f"<{type(value).__qualname__}{path}>"
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<{type(value).__qualname__}: repr raised {type(exc).__name__}>"
    return _ADDRESS.sub(" at 0x?", text[:500])

def item_fingerprint(item: pytest.Item) -> dict[str, Any]:
    """What identifies item beyond its node id (its definition's place, its parameters).

    A re-collecting child (spawn, zygote) compares it with the item it found under the same
    node id: index-based parametrize ids (``p0``, ``p1``) can name other values there.
    """
    path, lineno, _ = item.location
    out: dict[str, Any] = {"location": [str(path), lineno]}
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        out["params"] = {name: _stable_repr(v) for name, v in sorted(callspec.params.items())}
    return out

def fingerprint_difference(want: dict[str, Any], got: dict[str, Any]) -> str | None:
    wrong = [
        f"{key}: the parent's {want.get(key)!r}, the child's {got.get(key)!r}"
        for key in sorted(set(want) | set(got))
        if want.get(key) != got.get(key)
    ]
    return "; ".join(wrong) or None
