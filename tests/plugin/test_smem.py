"""Shared-memory caps and device markers, on a machine without a GPU.

A fake Triton driver and fake torch.cuda device properties stand in for the hardware; the
real kernels are in test_gpu.py. What is checked here is that every lookup that sizes or
loads a kernel sees the cap, and that a kernel over it fails with Triton's OutOfResources.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from coldhelp import conftest, modules_importable_by_name, needs_fork, run

# It imports torch: every pytester run with it is a subprocess, "in-process" ones too (coldhelp).
FAKE_HARDWARE = """
import sys, types
import torch, triton.compiler.compiler
from pytest_coldcompile.devices import cuda

H200 = 232448

class FakeUtils:
    def __init__(self):
        self.get_device_properties = lambda dev: {"max_shared_mem": H200,
                                                  "multiprocessor_count": 132}
    def load_binary(self, name, kernel, shared, device):
        return (1, 2, 32, 0, 1024)

class FakeDriver:
    def __init__(self):
        self.utils = FakeUtils()
    def get_current_device(self):
        return 0
    def launcher_cls(self, src, metadata):
        return lambda *args: None
    def get_current_target(self):
        return types.SimpleNamespace(warp_size=32)

DRIVERS = sys.modules["triton.runtime.driver"]
if LAZY:
    DRIVERS._create_driver = FakeDriver  # created on first use, as on a real machine
else:
    DRIVERS.driver.set_active(FakeDriver())

torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
    name="Fake H200", shared_memory_per_block_optin=H200, shared_memory_per_block=49152,
    multi_processor_count=132)

cuda._probe_uncached = lambda: cuda.DeviceFacts(
    (cuda.Gpu(0, "Fake H200", H200, 49152, (9, 0)),))
torch.version.cuda = torch.version.cuda or "12.8"  # a CUDA build, as on a GPU machine
"""

CAP_TESTS = """
import collections, os, sys
import pytest, torch
import triton.compiler.compiler as cc
from triton.runtime.errors import OutOfResources
from pytest_coldcompile import SMEM_LIMIT_ENV

DRIVER = sys.modules["triton.runtime.driver"].driver
Metadata = collections.namedtuple("Metadata", "shared num_warps tmem_size")


def compiled_kernel(shared):
    # A CompiledKernel as Triton's caches hold it: compiled, not loaded on the device yet.
    kernel = cc.CompiledKernel.__new__(cc.CompiledKernel)
    kernel.metadata = Metadata(shared, 4, None)
    kernel.module = kernel.function = kernel._run = kernel.src = None
    kernel.name, kernel.kernel, kernel.metadata_group, kernel.hash = "k", b"", {}, "h"
    return kernel


REFUSED = compiled_kernel(131072)  # one kernel object for the capped and the uncapped test


def static_kernel(shared):
    from torch._inductor.runtime import static_triton_launcher as launcher
    kernel = launcher.StaticallyLaunchedCudaKernel.__new__(launcher.StaticallyLaunchedCudaKernel)
    kernel.function, kernel.shared, kernel.cubin_path, kernel.name = None, shared, "k.cubin", "k"
    return kernel


@pytest.mark.smem_limit(101376)
def test_every_lookup_sees_the_cap(cold_state):
    assert cold_state.smem_limit == 101376
    assert os.environ[SMEM_LIMIT_ENV] == "101376"
    assert cc.max_shared_mem(0) == 101376
    assert DRIVER.active.utils.get_device_properties(0)["max_shared_mem"] == 101376
    assert DRIVER.active.utils.get_device_properties(0)["multiprocessor_count"] == 132
    props = torch.cuda.get_device_properties(0)
    assert props.shared_memory_per_block_optin == 101376
    assert props.multi_processor_count == 132 and props.name == "Fake H200"
    from torch._inductor.utils import get_gpu_shared_memory
    assert get_gpu_shared_memory() == 101376
    from torch._dynamo.device_interface import CudaInterface
    assert CudaInterface.get_device_properties(0).shared_memory_per_block_optin == 101376


@pytest.mark.smem_limit(101376)
def test_a_kernel_over_the_cap_fails_to_load_with_out_of_resources():
    with pytest.raises(OutOfResources, match="Required: 131072, Hardware limit: 101376"):
        REFUSED._init_handles()
    with pytest.raises(OutOfResources):
        REFUSED.run  # what a launch goes through
    compiled_kernel(101376)._init_handles()  # at the cap: loads
    with pytest.raises(OutOfResources, match="Required: 131072, Hardware limit: 101376"):
        static_kernel(131072).load_kernel(0)  # Inductor's static launcher, bypassing Triton


def test_without_a_marker_the_hardware_limit_is_back():
    assert SMEM_LIMIT_ENV not in os.environ
    assert cc.max_shared_mem(0) == 232448
    assert DRIVER.active.utils.get_device_properties(0)["max_shared_mem"] == 232448
    assert torch.cuda.get_device_properties(0).shared_memory_per_block_optin == 232448
    REFUSED.run(1, 1, 1)  # refused under the cap, loads without it: nothing was cached
    from torch._inductor.runtime import static_triton_launcher as launcher
    assert not hasattr(launcher.StaticallyLaunchedTritonKernel.load_kernel, "__wrapped__")
"""


@pytest.mark.parametrize(
    ("how", "lazy"),
    [
        pytest.param("in-process", False, id="in-process"),
        pytest.param("cold", False, marks=needs_fork, id="cold"),
        pytest.param("in-process", True, id="driver-created-under-the-cap"),
    ],
)
def test_the_cap_covers_triton_inductor_and_torch_lookups(
    pytester: pytest.Pytester, how: str, lazy: bool
) -> None:
    pytester.makeconftest(conftest(f"LAZY = {lazy}\n" + FAKE_HARDWARE))
    pytester.makepyfile(test_caps=CAP_TESTS)
    args = ["-p", "no:randomly"]
    if how == "cold":
        # The hardware-limit test runs in-process after the cold ones: the cap did not leak.
        pytester.makepyfile(
            test_caps=CAP_TESTS.replace(
                "@pytest.mark.smem_limit(101376)\\n",
                "@pytest.mark.smem_limit(101376)\\n@pytest.mark.cold_compile\\n",
            )
        )
    result = run(pytester, *args)
    result.assert_outcomes(passed=3)


def test_the_option_caps_cold_children(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(conftest("LAZY = False\n" + FAKE_HARDWARE))
    pytester.makepyfile(
        """
        import triton.compiler.compiler as cc
        def test_capped(cold_state):
            assert cold_state.cold and cold_state.smem_limit == 65536
            assert cc.max_shared_mem(0) == 65536
        """
    )
    run(pytester, "--cold-compile", "--smem-limit=65536").assert_outcomes(passed=1)


DEVICE_MARKERS = """
import pytest

@pytest.mark.requires_cuda
def test_cuda():
    pass

@pytest.mark.requires_smem(200000)
def test_fits():
    pass

@pytest.mark.requires_smem(300000)
def test_too_big():
    pass

@pytest.mark.requires_smem(200000)
@pytest.mark.smem_limit(101376)
def test_lowered():
    pass
"""


@pytest.mark.parametrize("args", [[], ["--cold-compile"]], ids=["in-process", "cold"])
def test_device_markers_skip_saying_what_was_needed_and_offered(
    pytester: pytest.Pytester, args: list[str]
) -> None:
    pytester.makeconftest(conftest("LAZY = False\n" + FAKE_HARDWARE))
    pytester.makepyfile(test_markers=DEVICE_MARKERS)
    result = run(pytester, "-rs", *args)
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "*requires_smem(300000): needs 300000 bytes of shared memory per block; Fake H200 "
            "offers 232448 (opt-in)",
            "*requires_smem(200000): needs 200000 bytes of shared memory per block; Fake H200 "
            "offers 232448 (opt-in), lowered to 101376 by smem_limit marker of "
            "test_markers.py::test_lowered",
        ]
    )


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this machine has an NVIDIA driver")
def test_without_a_gpu_device_markers_skip_and_cuda_is_never_touched(cold: pytest.Pytester) -> None:
    cold.makepyfile(test_markers=DEVICE_MARKERS)
    result = run(cold, "-rs", "--cold-compile")
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(
        [
            "*requires_cuda: needs a CUDA device; no NVIDIA driver on this machine "
            "(/dev/nvidiactl is missing)*",
            "*requires_smem(200000): needs a CUDA device; no NVIDIA driver on this machine*",
        ]
    )


FAKE_GPU_ONLY = """
from pytest_coldcompile.devices import cuda

cuda._probe_uncached = lambda: cuda.DeviceFacts(
    (cuda.Gpu(0, "Fake H200", 232448, 49152, (9, 0)),))
"""


@pytest.mark.parametrize("args", [[], ["--cold-compile"]], ids=["in-process", "cold"])
def test_a_gpu_with_a_cpu_build_of_torch_skips_naming_the_build(
    pytester: pytest.Pytester, args: list[str]
) -> None:
    from importlib import metadata

    # The installed distribution says what build it is (importing torch here would clash with
    # pytester's module snapshots); the markers read torch/version.py, not this.
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("needs torch")
    if not version.endswith("+cpu"):
        pytest.skip(f"needs a CPU build of torch (a '+cpu' release), not torch {version}")
    pytester.makeconftest(conftest(FAKE_GPU_ONLY))
    pytester.makepyfile(
        test_markers="""
        import sys, pytest

        @pytest.mark.requires_cuda
        def test_cuda():
            pass

        @pytest.mark.requires_smem(1024)
        def test_smem():
            pass

        def test_torch_was_not_imported_to_decide():
            assert "torch" not in sys.modules
        """
    )
    result = run(pytester, "-rs", *args)
    result.assert_outcomes(passed=1, skipped=2)
    build = f"torch {version} is a CPU build"
    result.stdout.fnmatch_lines(
        [
            f"*requires_cuda: needs a CUDA device; {build}",
            f"*requires_smem(1024): needs a CUDA device; {build}",
        ]
    )


def test_torch_build_is_read_from_version_py_without_importing(tmp_path, monkeypatch) -> None:
    from pytest_coldcompile.devices import markers

    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    version = "from typing import Optional\n__version__ = '9.9.9+{}'\ncuda: Optional[str] = {}\n"
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    (package / "version.py").write_text(version.format("cu128", "'12.8'"))
    assert markers.torch_build() == ("9.9.9+cu128", True)
    (package / "version.py").write_text(version.format("cpu", "None"))
    assert markers.torch_build() == ("9.9.9+cpu", False)
    assert "torch" not in sys.modules


def test_removing_a_cap_drops_the_device_properties_recorded_under_it() -> None:
    pytest.importorskip("torch")
    import torch._dynamo.device_interface as interface

    from pytest_coldcompile.devices import smem_cap

    cache = interface.caching_worker_device_properties
    saved = cache.pop("cuda", None)
    try:
        cap = smem_cap.install(1024)
        cache["cuda"] = ["recorded under the cap"]  # as CudaInterface.Worker records them
        cap.remove()
        assert "cuda" not in cache
        cache["cuda"] = ["recorded before the cap"]
        cap = smem_cap.install(1024)
        assert "cuda" not in cache  # the workers must ask again, capped
        cache["cuda"] = ["recorded under the cap"]
        cap.remove()
        assert cache["cuda"] == ["recorded before the cap"]
    finally:
        cache.pop("cuda", None)
        if saved is not None:
            cache["cuda"] = saved


def test_gpu_assignment_for_xdist_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_coldcompile.devices.cuda import gpu_for_worker

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert gpu_for_worker(2) is None  # not a worker
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert gpu_for_worker(2) == ("1", 1)
    assert gpu_for_worker(1) is None  # one GPU: nothing to split
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert gpu_for_worker(2) == ("6", 1)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    assert gpu_for_worker(2) == ("4", 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb,GPU-cccc")
    assert gpu_for_worker(3) == ("GPU-cccc", 2)


# Loaded with -p, before the zygote forks: each worker's zygote probes these two GPUs.
FAKE_TWO_GPUS = """
from pytest_coldcompile.devices import cuda
GPU = cuda.Gpu(0, "Fake", 232448, 49152, (9, 0))
cuda._probe_uncached = lambda: cuda.DeviceFacts((GPU, GPU))
"""


@needs_fork
@pytest.mark.parametrize("mode", ["auto", "zygote", "spawn"])
def test_xdist_cold_children_get_one_gpu_each(pytester: pytest.Pytester, mode: str) -> None:
    """Under the zygote the worker's zygote itself is given its GPU before it forks; the
    two-GPU run on real devices is tests/plugin/test_gpu_fork.py."""
    pytest.importorskip("xdist")
    pytester.makepyfile(fake_two_gpus=FAKE_TWO_GPUS)
    pytester.makepyfile(
        """
        import os, pytest
        @pytest.mark.parametrize("i", range(4))
        @pytest.mark.cold_compile
        def test_cold(i):
            worker = int(os.environ["PYTEST_XDIST_WORKER"][2:])
            assert os.environ["CUDA_VISIBLE_DEVICES"] == str(worker % 2)

        def test_in_process():
            assert "CUDA_VISIBLE_DEVICES" not in os.environ
        """
    )
    # Imported by each worker's zygote as it preloads: what the zygote itself sees.
    pytester.makepyfile(
        zygote_gpu="""
        import os
        with open("zygote-gpus.txt", "a") as f:
            f.write(f"{os.environ['PYTEST_XDIST_WORKER']} {os.environ['CUDA_VISIBLE_DEVICES']}\\n")
        """
    )
    pytester.makeini("[pytest]\ncold_compile_preload = zygote_gpu\n")
    pytester._monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    modules_importable_by_name(pytester)
    args = ["-n", "2", "-p", "fake_two_gpus", "--cold-compile-report=report.json"]
    if mode != "auto":
        args.append(f"--cold-compile-mode={mode}")
    run(pytester, *args).assert_outcomes(passed=5)
    report = json.loads((pytester.path / "report.json").read_text())
    assert {entry["mode"] for entry in report.values()} == {"fork" if mode == "auto" else mode}
    if mode == "zygote":
        seen = (pytester.path / "zygote-gpus.txt").read_text().split("\n")
        assert sorted(filter(None, seen)) == ["gw0 0", "gw1 1"]


FAKE_LIBCUDA = r"""
#include <string.h>
int cuInit(unsigned flags) { return 0; }
int cuDeviceGetCount(int *n) { *n = 2; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return 0; }
int cuDeviceGetName(char *s, int len, int d) { strcpy(s, "Fake GPU"); return 0; }
int cuDeviceGetPCIBusId(char *s, int len, int d) {
    strcpy(s, d ? "0000:02:00.0" : "0000:01:00.0");
    return 0;
}
int cuDeviceGetAttribute(int *v, int attr, int d) {
    *v = attr == 97 ? 232448 : attr == 8 ? 49152 : attr == 75 ? 9 : attr == 76 ? 0 : -1;
    return 0;
}
"""


@pytest.mark.skipif(not os.path.exists("/usr/bin/gcc"), reason="needs gcc for a fake libcuda")
def test_the_probe_reads_the_driver_in_a_subprocess(tmp_path, monkeypatch) -> None:
    import subprocess

    from pytest_coldcompile.devices import cuda

    (tmp_path / "fake.c").write_text(FAKE_LIBCUDA)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(tmp_path / "fake.c")],
        check=True,
    )
    control = tmp_path / "nvidiactl"
    control.touch()
    monkeypatch.setattr(cuda, "NVIDIA_CONTROL", str(control))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    facts = cuda._probe_uncached()
    assert [g.pci_bus_id for g in facts.gpus] == ["0000:01:00.0", "0000:02:00.0"]
    assert facts.gpus[0] == cuda.Gpu(0, "Fake GPU", 232448, 49152, (9, 0), "0000:01:00.0")
    with open("/proc/self/maps", encoding="utf-8") as maps:  # the probe's process loaded it
        assert str(tmp_path / "libcuda.so.1") not in maps.read()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cuda._probe_uncached().note == "CUDA_VISIBLE_DEVICES hides every device"
