"""The dependency versions this distribution supports, and the check that refuses the others.

The plugin reaches into private pytest internals and gridpair into private torch and Triton
ones, so an untested release fails here, by name, instead of misbehaving later. Imports nothing.
"""

from __future__ import annotations

import re

# (lowest supported, first unsupported); keep in step with pyproject.toml's bounds.
SUPPORTED: dict[str, tuple[str, str]] = {
    "pytest": ("8", "10"),
    "torch": ("2.11", "2.15"),
    "triton": ("3.6", "3.8"),
}


def _release(version: str) -> tuple[int, ...]:
    # "2.13.0+cpu", "3.7.1", "9.0.0rc1", "2.15.0a0+git..." -> the leading numeric release
    match = re.match(r"\d+(?:\.\d+)*", version.strip())
    if match is None:
        raise ValueError(f"version: expected a version string such as '9.0.1', got {version!r}")
    release = [int(part) for part in match.group().split(".")]
    return tuple([*release, 0, 0, 0][:3])  # "8" == "8.0" == "8.0.0"


def unsupported(name: str, version: str) -> str | None:
    """A message naming `version` and the supported range if `name` is outside it, else None."""
    if name not in SUPPORTED:
        raise ValueError(f"name: expected one of {', '.join(SUPPORTED)}, got {name!r}")
    low, high = SUPPORTED[name]
    if _release(low) <= _release(version) < _release(high):
        return None
    return (
        f"pytest-coldcompile supports {name}>={low},<{high}; this is {name} {version}. "
        f"Install a supported {name} (pip install '{name}>={low},<{high}')."
    )


def require(name: str, version: str, error: type[Exception] = ImportError) -> None:
    """Raise `error` with unsupported()'s message if `version` of `name` is not supported."""
    message = unsupported(name, version)
    if message is not None:
        raise error(message)
