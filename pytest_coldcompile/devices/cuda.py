"""CUDA device facts, learned without initializing CUDA in the pytest process.

A one-off probe subprocess asks the driver through ctypes (no torch import); a machine
without /dev/nvidiactl pays nothing. Also: has this process initialized the CUDA driver (can
it still fork safely), and which GPU a pytest-xdist worker's cold children get.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass

NVIDIA_CONTROL = "/dev/nvidiactl"

# CUdevice_attribute values from cuda.h (stable across CUDA versions).
_PROBE = r"""
import ctypes, json, sys
out = {"gpus": []}
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    print(json.dumps({"note": "libcuda.so.1 not loadable: %s" % exc})); sys.exit()
rc = cuda.cuInit(0)
if rc != 0:
    print(json.dumps({"note": "cuInit failed with CUresult %d" % rc})); sys.exit()
n = ctypes.c_int()
cuda.cuDeviceGetCount(ctypes.byref(n))
for i in range(n.value):
    dev = ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(dev), i)
    name = ctypes.create_string_buffer(256)
    cuda.cuDeviceGetName(name, 256, dev)
    bus = ctypes.create_string_buffer(64)
    cuda.cuDeviceGetPCIBusId(bus, 64, dev)
    def attr(a):
        v = ctypes.c_int()
        cuda.cuDeviceGetAttribute(ctypes.byref(v), a, dev)
        return v.value
    out["gpus"].append({"index": i, "name": name.value.decode(), "pci_bus_id": bus.value.decode(),
                        "smem_per_block": attr(8), "smem_optin": attr(97),
                        "capability": [attr(75), attr(76)]})
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    smem_optin: int
    smem_per_block: int
    capability: tuple[int, int]
    pci_bus_id: str = ""


@dataclass(frozen=True)
class DeviceFacts:
    gpus: tuple[Gpu, ...]
    note: str = ""  # why there is no GPU, when there is none

    def describe_none(self) -> str:
        return self.note or "no CUDA device is visible"


_facts: DeviceFacts | None = None


def _probe_uncached() -> DeviceFacts:
    if not os.path.exists(NVIDIA_CONTROL):
        return DeviceFacts((), f"no NVIDIA driver on this machine ({NVIDIA_CONTROL} is missing)")
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return DeviceFacts((), "CUDA_VISIBLE_DEVICES hides every device")
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except Exception as exc:
        return DeviceFacts((), f"the CUDA probe subprocess failed: {type(exc).__name__}: {exc}")
    gpus = tuple(
        Gpu(
            index=g["index"],
            name=g["name"],
            smem_optin=g["smem_optin"],
            smem_per_block=g["smem_per_block"],
            capability=(g["capability"][0], g["capability"][1]),
            pci_bus_id=g.get("pci_bus_id", ""),
        )
        for g in data.get("gpus", [])
    )
    return DeviceFacts(gpus, data.get("note", "" if gpus else "the CUDA driver reports 0 devices"))


def facts() -> DeviceFacts:
    """Device facts of this process's visible devices, probed once per process."""
    global _facts
    if _facts is None:
        _facts = _probe_uncached()
    return _facts


def cuda_driver_path() -> str | None:
    """The file of the libcuda mapped into this process, None when none is.

    Importing torch maps it without initializing it; reading /proc/self/maps touches nothing.
    """
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and os.path.basename(fields[5]).startswith("libcuda.so"):
                    return fields[5].strip()
    except OSError:
        return None
    return None


def cuda_driver_loaded() -> bool:
    """Whether libcuda is mapped into this process (which alone does not stop a fork)."""
    return cuda_driver_path() is not None


DRIVER_SONAME = "libcuda.so.1"  # the driver's soname, whatever file it is loaded from
# CUresult of any driver call but cuInit and cuDriverGetVersion before cuInit (cuda.h).
CUDA_ERROR_NOT_INITIALIZED = 3


def cuda_driver_initialized() -> bool:
    """Whether cuInit has run in this process: a fork of it could not use CUDA then.

    Not loaded: certainly not. Loaded: ask the loaded library itself with cuDeviceGetCount,
    which answers CUDA_ERROR_NOT_INITIALIZED before cuInit and initializes nothing. Any other
    answer, a failed cuInit's error included, counts as initialized: forking is then not known
    to be safe. Cheap enough to ask after every collected module: the loaded driver is found by
    its soname (dlopen with RTLD_NOLOAD loads nothing), not by reading /proc/self/maps.
    """
    import ctypes

    try:
        driver = ctypes.CDLL(DRIVER_SONAME, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False  # not loaded
    try:
        count = ctypes.c_int()
        rc = driver.cuDeviceGetCount(ctypes.byref(count))
    except AttributeError:
        return True  # a libcuda we cannot ask: assume the worst
    return rc != CUDA_ERROR_NOT_INITIALIZED


def torch_cuda_initialized() -> bool:
    """torch's own flag; reading it initializes nothing."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:
        return False


def xdist_worker_index() -> int | None:
    match = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) if match else None


def gpu_for_worker(gpu_count: int) -> tuple[str, int] | None:
    """(CUDA_VISIBLE_DEVICES value, position among this process's GPUs) for this xdist worker.

    Worker N gets visible GPU N modulo their number, from the existing CUDA_VISIBLE_DEVICES
    list when there is one. None outside xdist or with fewer than two GPUs.
    """
    worker = xdist_worker_index()
    if worker is None or gpu_count < 2:
        return None
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    names = [x.strip() for x in listed.split(",")] if listed else [str(i) for i in range(gpu_count)]
    names = names[:gpu_count]
    position = worker % len(names)
    return names[position], position


def narrow_to(position: int) -> None:
    """In a forked child given one GPU: the inherited facts now describe that GPU alone."""
    global _facts
    if _facts is not None and 0 <= position < len(_facts.gpus):
        gpu = _facts.gpus[position]
        _facts = DeviceFacts(
            (Gpu(0, gpu.name, gpu.smem_optin, gpu.smem_per_block, gpu.capability, gpu.pci_bus_id),),
            _facts.note,
        )


def context_ahead() -> bool:
    """In a child forked ahead of its test (ini cold_compile_cuda_ahead): create torch's CUDA
    context (``torch_context_ahead``), and Triton's driver where Triton is imported, before the
    test begins; False where torch is not imported, no device is there, or that failed (the
    test then meets CUDA as a fresh process does). Nothing is compiled or allocated. Triton's
    driver builds its host module into the Triton cache: only once the child's private caches
    are set."""
    if not torch_context_ahead():
        return False
    if "triton" in sys.modules:
        try:
            from triton.runtime import driver

            driver.active.get_current_target()
            driver.active.utils  # noqa: B018  (its host module, shared: host_modules)
        except Exception:
            pass
    return True


def torch_context_ahead() -> bool:
    """torch's CUDA context, made now (see context_ahead); it reads no cache of the child's."""
    torch = sys.modules.get("torch")
    if torch is None or not os.path.exists(NVIDIA_CONTROL):
        return False
    try:
        if not torch.cuda.is_available():
            return False
        torch.cuda.init()
        torch.cuda.synchronize()  # the context itself, not only the runtime's state
    except Exception:
        return False
    return True
