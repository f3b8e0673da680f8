"""GPU tests of the shared-memory cap and of cold children using CUDA (skipped without a GPU).

With COLDCOMPILE_TEST_CUDA_AT_COLLECTION=1, collecting this module calls
torch.cuda.is_available(), as torch's own test utilities do at import: the pytest process
then has the CUDA driver loaded, and `auto` spawns cold children (issue 4, item 9). Without
it, `auto` forks. docs/evidence/plugin_gpu.sh runs these on the H200 machine.
"""

from __future__ import annotations

import os

import pytest
import torch
import triton
import triton.language as tl
from coldhelp import run_inprocess

from pytest_coldcompile import SMEM_LIMIT_ENV

if os.environ.get("COLDCOMPILE_TEST_CUDA_AT_COLLECTION") == "1":
    torch.cuda.is_available()  # loads libcuda into the pytest process

CAP = 101376  # an RTX 4090 / L40S class device (99 KiB per block)


@triton.jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """c = a @ b for fp16 a (M, K), b (K, N), every dimension a multiple of its block."""
    pid_m = tl.program_id(0).to(tl.int64)
    pid_n = tl.program_id(1).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16))


# Tiles whose pipelined operand buffers need more than CAP bytes on Hopper (e.g. 4 stages of
# 128x64 + 64x128 fp16 = 131072 bytes); the first that compiles over CAP and fits the device
# is used, so the test does not depend on one compiler version's exact allocation.
_BIG_CONFIGS = [
    (128, 128, 64, 4, 8),
    (128, 128, 64, 5, 8),
    (128, 256, 64, 3, 8),
    (256, 128, 64, 3, 8),
    (128, 128, 128, 3, 8),
]


def _operands(size: int = 512) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    return a, b, torch.empty(size, size, device="cuda", dtype=torch.float16)


def _launch(
    cfg: tuple[int, ...], a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, warmup: bool = False
) -> object:
    bm, bn, bk, stages, warps = cfg
    args = (
        a,
        b,
        c,
        a.shape[1],
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
    )
    grid = (a.shape[0] // bm, b.shape[1] // bn)
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_stages": stages, "num_warps": warps}
    if warmup:
        return _matmul_kernel.warmup(*args, grid=grid, **meta)
    return _matmul_kernel[grid](*args, **meta)


def _big_kernel() -> tuple[tuple[int, ...], object]:
    """(config, compiled kernel, not loaded) needing more than CAP bytes of shared memory."""
    a, b, c = _operands()
    optin = _hardware_optin()
    for cfg in _BIG_CONFIGS:
        compiled = _launch(cfg, a, b, c, warmup=True)  # compiles; loads nothing
        if CAP < compiled.metadata.shared <= optin:
            return cfg, compiled
    pytest.fail(f"none of {_BIG_CONFIGS} needs between {CAP} and {optin} bytes")


def _hardware_optin() -> int:
    from pytest_coldcompile.devices import cuda

    return cuda.facts().gpus[0].smem_optin


# -- cold children using CUDA (issue 4) ----------------------------------------------------------


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
def test_cold_child_uses_cuda(cold_state, compile_counter, record_property):
    """A torch.compile'd CUDA function in a cold child, in a session that touched CUDA."""
    record_property("mode", cold_state.mode)
    x = torch.randn(1024, device="cuda", requires_grad=True)
    compiled = torch.compile(lambda t: (t.sin() * t).sum(), backend=compile_counter)
    compiled(x).backward()
    torch.testing.assert_close(x.grad, (x.sin() + x * x.cos()).detach())
    compile_counter.assert_graphs(frames=1, forward=1, backward=1)
    assert os.listdir(os.path.join(cold_state.cache_dir, "triton", "cache"))


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
def test_device_facts_match_what_cuda_reports():
    from pytest_coldcompile.devices import cuda

    gpu = cuda.facts().gpus[0]
    props = torch.cuda.get_device_properties(0)
    assert gpu.smem_optin == props.shared_memory_per_block_optin
    assert gpu.capability == (props.major, props.minor)
    assert gpu.name == props.name


# -- the shared-memory cap on real kernels (issue 5) ---------------------------------------------


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
def test_big_kernel_loads_without_a_cap(record_property):
    cfg, compiled = _big_kernel()
    record_property("shared", compiled.metadata.shared)
    a, b, c = _operands()
    _launch(cfg, a, b, c)
    torch.testing.assert_close(c, a @ b, atol=1e-1, rtol=1e-2)


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
@pytest.mark.smem_limit(CAP)
def test_big_kernel_fails_to_load_under_the_cap(record_property):
    from triton.compiler.compiler import max_shared_mem
    from triton.runtime import driver
    from triton.runtime.errors import OutOfResources

    assert os.environ[SMEM_LIMIT_ENV] == str(CAP)
    # torch first: Triton's driver utilities expect an initialized driver, and a child forked
    # from a clean pytest process starts with none (collection's probes ask NVML).
    assert torch.cuda.get_device_properties(0).shared_memory_per_block_optin == CAP
    assert driver.active.utils.get_device_properties(0)["max_shared_mem"] == CAP
    assert max_shared_mem(0) == CAP
    from torch._inductor.utils import get_gpu_shared_memory

    assert get_gpu_shared_memory() == CAP
    cfg, compiled = _big_kernel()
    record_property("shared", compiled.metadata.shared)
    a, b, c = _operands()
    with pytest.raises(
        OutOfResources, match=f"shared memory, Required: \\d+, Hardware limit: {CAP}"
    ):
        _launch(cfg, a, b, c)


@pytest.mark.requires_cuda
@pytest.mark.smem_limit(CAP)
def test_in_process_cap_refuses_the_big_kernel():
    from triton.runtime.errors import OutOfResources

    cfg, _ = _big_kernel()
    a, b, c = _operands()
    with pytest.raises(OutOfResources):
        _launch(cfg, a, b, c)


@pytest.mark.requires_cuda
def test_in_process_the_same_kernel_loads_once_the_cap_is_gone():
    # Same process, same Triton JIT cache entry as the test above: nothing of the cap stays.
    cfg, _ = _big_kernel()
    a, b, c = _operands()
    _launch(cfg, a, b, c)
    torch.testing.assert_close(c, a @ b, atol=1e-1, rtol=1e-2)


@pytest.mark.requires_cuda
def test_a_removed_cap_leaves_inductor_workers_uncapped():
    """Inductor's compile workers read device properties recorded by the first caller."""
    from torch._dynamo import device_interface

    from pytest_coldcompile.devices import smem_cap

    worker = device_interface.CudaInterface.Worker
    cache = device_interface.caching_worker_device_properties
    real = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    saved = cache.pop("cuda", None)  # recorded first under the cap, as in a fresh process
    try:
        cap = smem_cap.install(CAP)
        try:
            assert worker.get_device_properties(0).shared_memory_per_block_optin == min(real, CAP)
        finally:
            cap.remove()
        assert worker.get_device_properties(0).shared_memory_per_block_optin == real
    finally:
        cache.pop("cuda", None)
        if saved is not None:
            cache["cuda"] = saved


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
def test_requires_cuda_runs_where_torch_is_a_cuda_build():
    assert torch.version.cuda is not None and torch.cuda.is_available()


def _static_kernel(compiled: object, tmp_path) -> object:
    from torch._inductor.runtime import static_triton_launcher as launcher

    cubin = tmp_path / "kernel.cubin"
    cubin.write_bytes(compiled.asm["cubin"])
    compiled._cubin_path = str(cubin)  # where Inductor points it, in its own Triton cache
    try:
        return launcher.StaticallyLaunchedCudaKernel(compiled)
    except NotImplementedError as exc:
        pytest.skip(f"Inductor's static launcher cannot take this kernel: {exc}")


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
def test_static_launcher_loads_the_big_kernel_without_a_cap(tmp_path):
    _, compiled = _big_kernel()
    static = _static_kernel(compiled, tmp_path)
    static.load_kernel(0)
    assert static.function is not None


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
@pytest.mark.smem_limit(CAP)
def test_static_launcher_refuses_the_big_kernel_under_the_cap(tmp_path):
    from triton.runtime.errors import OutOfResources

    _, compiled = _big_kernel()
    static = _static_kernel(compiled, tmp_path)
    with pytest.raises(OutOfResources, match=f"Hardware limit: {CAP}"):
        static.load_kernel(0)


@pytest.fixture
def kernel_loads(monkeypatch):
    """Every kernel load attempted: (path "static" | "triton", shared bytes, loaded?)."""
    from torch._inductor.runtime import static_triton_launcher as launcher
    from triton.compiler import compiler

    seen: list[tuple[str, int, bool]] = []
    static_load = launcher.StaticallyLaunchedTritonKernel.load_kernel
    triton_init = compiler.CompiledKernel._init_handles

    def record(path, shared, load):
        try:
            result = load()
        except BaseException:
            seen.append((path, shared, False))
            raise
        seen.append((path, shared, True))
        return result

    def load_kernel(self, device):
        if self.function is not None:
            return static_load(self, device)
        return record("static", self.shared, lambda: static_load(self, device))

    def init_handles(self):
        if self.module is not None:
            return triton_init(self)
        return record("triton", self.metadata.shared, lambda: triton_init(self))

    monkeypatch.setattr(launcher.StaticallyLaunchedTritonKernel, "load_kernel", load_kernel)
    monkeypatch.setattr(compiler.CompiledKernel, "_init_handles", init_handles)
    return seen


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
@pytest.mark.smem_limit(CAP)
def test_inductor_kernels_stay_under_the_cap(kernel_loads, record_property):
    """Max-autotune matmul templates under the cap: the template heuristics prune by
    shared_memory_per_block_optin, the static launcher loads what is left; whatever still
    comes out over the cap is refused (autotuning skips it), and the compiled function works."""
    import torch._inductor.config as inductor_config

    inductor_config.max_autotune_gemm_backends = "TRITON"
    a, b, _ = _operands(1024)
    compiled = torch.compile(lambda x, y: (x @ y).relu(), mode="max-autotune-no-cudagraphs")
    out = compiled(a, b)
    torch.testing.assert_close(out, (a @ b).relu(), atol=1e-1, rtol=1e-2)
    loaded = [(path, shared) for path, shared, ok in kernel_loads if ok]
    refused = [(path, shared) for path, shared, ok in kernel_loads if not ok]
    record_property("loaded", len(loaded))
    record_property("max_loaded_shared", max((s for _, s in loaded), default=0))
    record_property("refused", len(refused))
    record_property("refused_over_cap", sum(s > CAP for _, s in refused))
    assert loaded, "no kernel was loaded"
    assert any(path == "static" for path, _ in loaded), "the static launcher loaded nothing"
    assert max(s for _, s in loaded) <= CAP, loaded


@pytest.mark.requires_cuda
@pytest.mark.cold_compile
@pytest.mark.smem_limit(CAP)
def test_user_kernel_inside_torch_compile_fails_under_the_cap():
    cfg, _ = _big_kernel()
    a, b, c = _operands()

    def run(x, y, out):
        _launch(cfg, x, y, out)
        return out

    with pytest.raises(Exception, match=f"(?s)(OutOfResources|out of resource).*{CAP}"):
        torch.compile(run)(a, b, c)


# -- device markers against the real device --------------------------------------------------------


LOWERED = f"""
import pytest

@pytest.mark.requires_cuda
def test_cuda():
    pass

@pytest.mark.requires_smem(232448)
def test_offered():
    pass

@pytest.mark.requires_smem(232448)
@pytest.mark.smem_limit({CAP})
def test_lowered():
    raise AssertionError("must be skipped: the cap leaves {CAP} bytes")
"""


@pytest.mark.requires_cuda
def test_device_markers_run_where_the_device_offers_and_skip_once_a_cap_lowers_it(
    pytester: pytest.Pytester,
) -> None:
    # The oracle is torch's view of the device, not the markers' own probe.
    optin = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    if optin < 232448:
        pytest.skip(f"needs a device with 232448 bytes of shared memory per block, not {optin}")
    pytester.makepyfile(test_lowered=LOWERED)
    # In-process: this module imported torch and triton already; the run imports neither again.
    result = run_inprocess(pytester, "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*test_lowered.py:*: requires_smem(232448): needs 232448 bytes of shared memory per "
            f"block; * offers {optin} (opt-in), lowered to {CAP} by smem_limit marker of "
            "test_lowered.py::test_lowered"
        ]
    )
