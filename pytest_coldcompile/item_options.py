"""What one test's markers say, resolved against the session's settings (marker > command
line > ini): whether it runs cold, its timeout, its shared-memory cap or emulated device, the
device it requires. A bad marker argument raises ValueError naming the marker and the test.
"""

from __future__ import annotations

import pytest

from pytest_coldcompile.options import (
    parse_bytes,
    parse_device,
    parse_smem,
    parse_timeout,
    settings,
)

# Set on the items that prove a guards mark: they run in the pytest process and start cold
# children of their own, so the engine never runs them in one.
PROOF_ITEM_KEY = pytest.StashKey[bool]()


def is_cold(item: pytest.Item) -> bool:
    if item.stash.get(PROOF_ITEM_KEY, False):
        return False
    s = settings(item.config)
    # An emulated device lives in a cold child: its target compiles in the child's own cache.
    return (s.cold_all or s.emulate_device is not None
            or item.get_closest_marker("cold_compile") is not None
            or item.get_closest_marker("emulate_device") is not None)


def timeout_for(item: pytest.Item) -> tuple[float | None, str]:
    """The cold child's time limit for item and where it came from: marker > option > ini."""
    marker = item.get_closest_marker("cold_compile")
    if marker is not None and (marker.args or set(marker.kwargs) - {"timeout", "budget"}):
        raise ValueError(f"cold_compile marker of {item.nodeid}: expected cold_compile or "
                         f"cold_compile(timeout=SECONDS), got {marker!r} (its keyword "
                         "arguments: timeout=SECONDS, budget=SECONDS)")
    given = marker_seconds(item, "timeout")
    if given is not None:
        return given
    s = settings(item.config)
    return s.timeout, s.timeout_source


def marker_seconds(item: pytest.Item, name: str) -> tuple[float | None, str] | None:
    """The cold_compile marker's ``name=SECONDS`` of item and its source; None where not given.

    Raises ValueError naming the marker when the value is not a number of seconds >= 0.
    """
    marker = item.get_closest_marker("cold_compile")
    if marker is None or marker.kwargs.get(name) is None:
        return None
    source = f"cold_compile({name}=...) marker of {item.nodeid}"
    try:
        return parse_timeout(marker.kwargs[name], source), source
    except pytest.UsageError as exc:
        raise ValueError(str(exc)) from None


def smem_limit_for(item: pytest.Item) -> tuple[int | None, str]:
    """The shared-memory cap for item and where it came from: marker > option > ini.

    Raises ValueError naming the marker when its argument is not a positive byte count.
    """
    limit, _, source = smem_named_for(item)
    return limit, source


def smem_named_for(item: pytest.Item) -> tuple[int | None, str | None, str]:
    """(bytes, device name or None, source) of item's shared-memory cap: marker > option > ini.

    Raises ValueError naming the marker when its argument is neither bytes nor a device.
    """
    marker = item.get_closest_marker("smem_limit")
    if marker is not None:
        source = f"smem_limit marker of {item.nodeid}"
        if len(marker.args) != 1 or marker.kwargs:
            raise ValueError(f"{source}: expected smem_limit(BYTES) or smem_limit(DEVICE), "
                             f"got {marker!r}")
        return (*parse_smem(marker.args[0], source, ValueError), source)
    s = settings(item.config)
    return s.smem_limit, s.smem_device, s.smem_source


def emulated_device_for(item: pytest.Item) -> tuple[str | None, str]:
    """The device item emulates and where that came from: marker > option > ini.

    Raises ValueError naming the marker when it names no device.
    """
    marker = item.get_closest_marker("emulate_device")
    if marker is not None:
        source = f"emulate_device marker of {item.nodeid}"
        if len(marker.args) != 1 or marker.kwargs:
            raise ValueError(f"{source}: expected emulate_device(DEVICE), got {marker!r}")
        return parse_device(marker.args[0], source, ValueError), source
    s = settings(item.config)
    return s.emulate_device, s.emulate_source


def effective_smem_for(item: pytest.Item) -> tuple[int | None, str]:
    """The per-block shared memory item's kernels get and what set it: the smem_limit cap,
    lowered to the emulated device's limit. Raises ValueError naming a bad marker."""
    from pytest_coldcompile.devices import named

    limit, source = smem_limit_for(item)
    emulated, emulated_source = emulated_device_for(item)
    if emulated is not None:
        device_limit = named.DEVICES[emulated].shared_per_block
        if limit is None or device_limit < limit:
            return device_limit, emulated_source
    return limit, source


def required_smem(item: pytest.Item) -> int | None:
    marker = item.get_closest_marker("requires_smem")
    if marker is None:
        return None
    source = f"requires_smem marker of {item.nodeid}"
    if len(marker.args) != 1 or marker.kwargs:
        raise ValueError(f"{source}: expected requires_smem(BYTES), got {marker!r}")
    return parse_bytes(marker.args[0], source, ValueError)


def requires_cuda(item: pytest.Item) -> bool:
    """Whether item carries the requires_cuda marker; ValueError naming it when it has
    arguments (it takes none)."""
    marker = item.get_closest_marker("requires_cuda")
    if marker is not None and (marker.args or marker.kwargs):
        raise ValueError(f"requires_cuda marker of {item.nodeid}: expected requires_cuda "
                         f"without arguments, got {marker!r}")
    return marker is not None
