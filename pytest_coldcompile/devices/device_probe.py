"""The probe: a child forked from the pytest process (CUDA still uninitialized there, torch
already imported) that initializes CUDA and records torch.cuda's answers for every visible
device, so that the pytest process can answer collection's device queries without
initializing CUDA itself. Also the record and the properties stand-in rebuilt from it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

PROBE_TIMEOUT_S = 120.0


def _plain(value: Any, depth: int = 0) -> Any:
    """value as JSON: objects as their public attributes, str and repr (two levels deep)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return {"__bytes__": value.hex()}
    if isinstance(value, (list, tuple)):
        items = [_plain(v, depth + 1) for v in value]
        return items if isinstance(value, list) else {"__tuple__": items}
    attrs = {}
    if depth < 2:
        for name in dir(value):
            if name.startswith("_"):
                continue
            try:
                attr = getattr(value, name)
            except Exception:
                continue
            if not callable(attr):
                attrs[name] = _plain(attr, depth + 1)
    return {"__object__": {"str": str(value), "repr": repr(value), "attrs": attrs}}


def ask(cuda: ModuleType) -> dict[str, Any]:
    """torch.cuda's answers, in a process that may initialize CUDA (the probe child)."""
    out: dict[str, Any] = {"is_available": bool(cuda.is_available()),
                           "device_count": int(cuda.device_count())}
    if not out["is_available"]:
        return out
    out["current_device"] = int(cuda.current_device())
    devices = []
    for index in range(cuda.device_count()):
        props = cuda.get_device_properties(index)
        devices.append({"attrs": _plain(props)["__object__"]["attrs"], "repr": repr(props)})
    out["devices"] = devices
    try:
        out["is_bf16_supported"] = [bool(cuda.is_bf16_supported(including_emulation=False)),
                                    bool(cuda.is_bf16_supported(including_emulation=True))]
    except Exception:
        pass  # not this torch's to answer: the pytest process asks its own
    return out


class Answered:
    """A value recorded in the probe that was neither JSON nor a tuple (a device's uuid): its
    public attributes, str and repr, read-only."""

    def __init__(self, attrs: dict[str, Any], text: str, representation: str) -> None:
        object.__setattr__(self, "_str", text)
        object.__setattr__(self, "_repr", representation)
        for name, value in attrs.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"attribute {name!r} is read-only (answered from the probe)")

    def __str__(self) -> str:
        return str(self._str)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return str(self._repr)  # type: ignore[attr-defined]


class DeviceProperties(Answered):
    """Stands in for ``torch.cuda.get_device_properties(i)`` during collection: the same public
    attributes and repr; ``isinstance(x, torch._C._CudaDeviceProperties)`` is False."""


def decode(value: Any) -> Any:
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if "__bytes__" in value:
            return bytes.fromhex(value["__bytes__"])
        if "__tuple__" in value:
            return tuple(decode(v) for v in value["__tuple__"])
        if "__object__" in value:
            obj = value["__object__"]
            attrs = {k: decode(v) for k, v in obj.get("attrs", {}).items()}
            return Answered(attrs, obj.get("str", ""), obj.get("repr", ""))
        return {k: decode(v) for k, v in value.items()}
    return value


class Record:
    """What the probe learned; `failed` says why there is nothing to answer from."""

    def __init__(self, data: dict[str, Any] | None = None, failed: str = "") -> None:
        data = data or {}
        self.failed = failed or str(data.get("error", ""))
        self.is_available = bool(data.get("is_available", False))
        self.device_count = int(data.get("device_count", 0))
        self.current_device = int(data.get("current_device", 0))
        self.devices = [
            DeviceProperties({k: decode(v) for k, v in d["attrs"].items()}, d["repr"], d["repr"])
            for d in data.get("devices", [])
        ]
        bf16 = data.get("is_bf16_supported")
        self.bf16 = (bool(bf16[0]), bool(bf16[1])) if bf16 else None
        self.seconds = 0.0  # how long the pytest process waited for it

    def usable(self) -> bool:
        """Whether device queries can be answered: the probe initialized CUDA and saw devices."""
        return not self.failed and self.is_available and bool(self.devices)


class Probe:
    """Forks the probe child when asked for the record (once): the child runs `in_child`
    (which must initialize CUDA there only) and sends its answer back through a pipe."""

    def __init__(self, in_child: Callable[[], dict[str, Any]]) -> None:
        self._in_child = in_child
        self._record: Record | None = None

    def record(self) -> Record:
        if self._record is None:
            began = time.perf_counter()
            self._record = self._fork()
            self._record.seconds = time.perf_counter() - began
        return self._record

    def _fork(self) -> Record:
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            return Record(failed=f"the probe could not fork: {exc}")
        if pid == 0:  # the probe child: answer, then leave without running anything else
            try:
                os.close(read_fd)
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)  # what torch prints while initializing stays out of the
                os.dup2(null, 2)  # pytest process's capture
                try:
                    payload = json.dumps(self._in_child())
                except BaseException as exc:
                    payload = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
                data = payload.encode()
                while data:
                    data = data[os.write(write_fd, data):]
            finally:
                os._exit(0)
        os.close(write_fd)
        try:
            return self._read(read_fd, pid)
        finally:
            os.close(read_fd)

    def _read(self, read_fd: int, pid: int) -> Record:
        chunks = []
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            ready = select.select([read_fd], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return Record(failed=f"the probe ran longer than {PROBE_TIMEOUT_S:g} s")
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        try:
            return Record(json.loads(b"".join(chunks).decode()))
        except ValueError:
            return Record(failed=f"the probe ended without an answer (wait status {status})")
