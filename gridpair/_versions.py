"""The torch and Triton releases gridpair supports, and the check that refuses the others.

gridpair reaches into private torch and Triton internals, so ``import gridpair`` fails on an
untested release, by name, instead of misbehaving later. Imports nothing.
"""

import re

# (lowest supported, first unsupported): the bounds of pyproject.toml's [gridpair] extra.
SUPPORTED: dict[str, tuple[str, str]] = {
    "torch": ("2.11", "2.15"),
    "triton": ("3.6", "3.8"),
}


def _release(version: str) -> tuple[int, ...]:
    # "2.13.0+cpu", "3.7.1", "2.15.0a0+git..." -> the leading numeric release, three parts
    match = re.match(r"\d+(?:\.\d+)*", version.strip())
    if match is None:
        raise ValueError(f"version: expected a version string such as '2.13.0', got {version!r}")
    release = [int(part) for part in match.group().split(".")]
    return tuple([*release, 0, 0, 0][:3])


def unsupported(name: str, version: str) -> str | None:
    """A message naming ``version`` and the supported range if ``name`` is outside it."""
    if name not in SUPPORTED:
        raise ValueError(f"name: expected one of {', '.join(SUPPORTED)}, got {name!r}")
    low, high = SUPPORTED[name]
    if _release(low) <= _release(version) < _release(high):
        return None
    return (f"gridpair supports {name}>={low},<{high}; this is {name} {version}. "
            f"Install a supported {name} (pip install '{name}>={low},<{high}').")


def require(name: str, version: str) -> None:
    """Raise ImportError with ``unsupported``'s message if ``version`` is not supported."""
    message = unsupported(name, version)
    if message is not None:
        raise ImportError(message)
