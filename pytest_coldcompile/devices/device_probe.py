"""The probe process: a helper interpreter that imports the pytest process's own torch,
initializes CUDA there and records torch.cuda's answers for every visible device, so that the
pytest process can answer collection's device queries without initializing CUDA itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

# Runs in the probe. argv[1]: the directory the pytest process imported torch from, so that the
# probe asks the same torch whatever its working directory and sys.path hold. Before CUDA is
# initialized it asks what the pytest process would ask before it (is_available and
# device_count by the same code path, under the same environment); then it initializes it.
_PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch

def plain(value, depth=0):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return {"__bytes__": value.hex()}
    if isinstance(value, (list, tuple)):
        items = [plain(v, depth + 1) for v in value]
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
                attrs[name] = plain(attr, depth + 1)
    return {"__object__": {"type": type(value).__name__, "str": str(value),
                           "repr": repr(value), "attrs": attrs}}

cuda = torch.cuda
out = {"is_available": bool(cuda.is_available()), "device_count": int(cuda.device_count())}
if out["is_available"]:
    try:
        out["current_device"] = int(cuda.current_device())
        devices = []
        for index in range(cuda.device_count()):
            props = cuda.get_device_properties(index)
            devices.append({"attrs": plain(props)["__object__"]["attrs"], "repr": repr(props)})
        out["devices"] = devices
        try:
            out["is_bf16_supported"] = [bool(cuda.is_bf16_supported(including_emulation=False)),
                                        bool(cuda.is_bf16_supported(including_emulation=True))]
        except Exception:  # not this torch's to answer: the pytest process asks its own
            pass
    except Exception as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
print("coldcompile-probe " + json.dumps(out))
"""

_MARK = "coldcompile-probe "
PROBE_TIMEOUT_S = 120.0


class Answered:
    """A value recorded in the probe that was neither JSON nor a tuple (a device's uuid): its
    public attributes, str and repr, read-only."""

    def __init__(self, attrs: dict[str, Any], text: str, representation: str) -> None:
        object.__setattr__(self, "_attrs", attrs)
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

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Answered) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


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

    def usable(self) -> bool:
        """Whether device queries can be answered: the probe initialized CUDA and saw devices."""
        return not self.failed and self.is_available and bool(self.devices)


class Probe:
    """One probe subprocess, started at once; `record()` waits for it (once)."""

    def __init__(self, torch_dir: str) -> None:
        self._record: Record | None = None
        try:
            self._proc: subprocess.Popen[str] | None = subprocess.Popen(
                [sys.executable, "-c", _PROBE, torch_dir],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=dict(os.environ),
            )
        except OSError as exc:
            self._proc = None
            self._record = Record(failed=f"the probe process could not start: {exc}")

    def record(self) -> Record:
        if self._record is None:
            self._record = self._wait()
        return self._record

    def _wait(self) -> Record:
        assert self._proc is not None
        try:
            out, err = self._proc.communicate(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.stop()
            return Record(failed=f"the probe process ran longer than {PROBE_TIMEOUT_S:g} s")
        finally:
            self._proc = None
        for line in reversed(out.splitlines()):
            if line.startswith(_MARK):
                try:
                    return Record(json.loads(line[len(_MARK):]))
                except ValueError as exc:
                    return Record(failed=f"the probe's answer was not read: {exc}")
        last = err.strip().splitlines()[-1:] or ["no output"]
        return Record(failed=f"the probe process failed: {last[0]}")

    def stop(self) -> None:
        """End a probe whose answers were never needed; reap it."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.communicate()
