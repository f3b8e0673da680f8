"""An emulated device compiles every Triton kernel also for its own architecture: on a CPU
runner (TRITON_INTERPRET=1) each launch is judged before it runs, on a GPU each load; the
verdict is the device's, whatever the real GPU's compile would need."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from coldhelp import needs_modules, run

# The kernel module of every project below: the tutorial matmul and a retry loop over tiles.
KERNEL = (Path(__file__).parent / "matmul_kernel.py").read_text()

RETRY_TESTS = """
    import pytest
    import torch
    from kernel import first_tile_that_loads

    # An H200 capped at an RTX PRO 6000's 99 KB still compiles sm_90 code: the 4-stage tile
    # needs 131072 bytes there. The RTX PRO 6000 itself (sm_120) needs 98304 and takes it.
    @pytest.mark.parametrize("tile", [
        pytest.param((128, 128, 64, 4), id="rtx",
                     marks=pytest.mark.emulate_device("rtx-pro-6000-blackwell")),
        pytest.param((128, 128, 64, 3), id="capped-h200",
                     marks=[pytest.mark.emulate_device("h200"),
                            pytest.mark.smem_limit("rtx-pro-6000-blackwell")]),
    ])
    def test_retry(tile, cold_state):
        a = torch.randn(128, 64, dtype=torch.float16)
        b = torch.randn(64, 128, dtype=torch.float16)
        chosen, c, refusals = first_tile_that_loads(a, b)
        print("EMULATED", cold_state.emulated_device, cold_state.smem_limit, chosen, refusals)
        assert chosen == tile
        torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.05, rtol=0.01)
"""


def _skip_unless_the_interpreter_runs_the_kernel() -> None:
    """Triton 3.6's interpreter cannot run the kernel's loop over a run-time bound under numpy
    2.4 or newer (docs/emulation.md); the GPU machine has Triton 3.6 and numpy 2.5. Read from
    the distributions' metadata: importing either here would outlive pytester's runs."""
    from importlib.metadata import PackageNotFoundError, version

    def release(name: str) -> tuple[int, ...]:
        try:
            return tuple(int(p) for p in version(name).split(".")[:2])
        except (PackageNotFoundError, ValueError):
            return ()

    triton, numpy = release("triton"), release("numpy")
    if triton and triton < (3, 7) and numpy >= (2, 4):
        pytest.skip(f"Triton {version('triton')}'s interpreter needs numpy < 2.4 for a loop "
                    f"over a run-time bound; numpy {version('numpy')} is installed")


@pytest.fixture
def interpreted(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory,
                monkeypatch: pytest.MonkeyPatch) -> Path:
    """A downstream project run under TRITON_INTERPRET=1, with a home of its own: returns it,
    so that a test can check nothing was written to the user's default caches."""
    _skip_unless_the_interpreter_runs_the_kernel()
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("TRITON_HOME", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    pytester.makepyfile(kernel=KERNEL)
    return home


def _report(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "report.json").read_text())


def _files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


@needs_modules("torch", "triton")
def test_a_retry_loop_lands_on_the_tile_the_emulated_device_takes(
    pytester: pytest.Pytester, interpreted: Path
) -> None:
    pytester.makepyfile(test_retry=RETRY_TESTS)
    result = run(pytester, "-s", "--cold-compile-report=report.json", timeout=600)
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "EMULATED rtx-pro-6000-blackwell 101376 (128, 128, 64, 4) []\n" in out
    assert ("EMULATED h200 101376 (128, 128, 64, 3) ['out of resource: shared memory, Required: "
            "131072, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.']\n"
            in out)
    report = _report(pytester)
    capped = report["test_retry.py::test_retry[capped-h200]"]
    assert (capped["emulated_device"], capped["smem_limit"], capped["smem_device"]) == (
        "h200", 101376, "rtx-pro-6000-blackwell")
    there = [(k["there"]["arch"], k["there"]["shared"], k["outcome"])
             for k in capped["emulation"]["kernels"]]
    assert there == [(90, 131072, "out_of_resources"), (90, 98304, "fits")]
    assert ("emulated h200 (sm_90): test_retry.py::test_retry[capped-h200]: matmul_kernel "
            "there 131072 B, ") in out
    assert " registers: out of shared memory (131072 > 101376)\n" in out
    assert not (interpreted / ".triton").exists(), _files_under(interpreted)


CACHED_TEST = """
    from pathlib import Path

    import pytest
    import torch
    from kernel import matmul

    @pytest.mark.emulate_device("a100")
    def test_launches(cold_state):
        a = torch.randn(64, 32, dtype=torch.float16)
        b = torch.randn(32, 64, dtype=torch.float16)
        for _ in range(3):
            matmul(a, b, (64, 64, 32, 2))
        matmul(a, b, (32, 32, 32, 2))  # another constexpr: another kernel
        cubins = Path(cold_state.cache_dir, "triton", "cache").rglob("*.cubin")
        print("CUBINS", len(list(cubins)))
"""


@needs_modules("torch", "triton")
def test_the_target_compile_is_made_once_per_kernel_in_the_childs_cache(
    pytester: pytest.Pytester, interpreted: Path
) -> None:
    pytester.makepyfile(test_cached=CACHED_TEST)
    result = run(pytester, "-s", "--cold-compile-report=report.json", timeout=600)
    result.assert_outcomes(passed=1)
    record = _report(pytester)["test_cached.py::test_launches"]
    assert record["emulation"]["target_compiles"] == 2
    assert [k["there"]["arch"] for k in record["emulation"]["kernels"]] == [80, 80]
    result.stdout.fnmatch_lines(["*CUBINS 2"])  # compiled into the child's own cache
    assert not (interpreted / ".triton").exists(), _files_under(interpreted)


@needs_modules("torch", "triton")
def test_without_emulation_the_interpreter_runs_every_tile(
    pytester: pytest.Pytester, interpreted: Path
) -> None:
    # The same retry loop, cold but with no device emulated, takes the first tile: the
    # refusal above is the emulation's.
    pytester.makepyfile(test_plain="""
        import torch
        from kernel import first_tile_that_loads

        def test_plain(cold_state):
            a = torch.randn(128, 64, dtype=torch.float16)
            b = torch.randn(64, 128, dtype=torch.float16)
            assert first_tile_that_loads(a, b)[0] == (128, 128, 64, 4)
            assert cold_state.emulated_device is None
    """)
    result = run(pytester, "--cold-compile", "--smem-limit=rtx-pro-6000-blackwell")
    result.assert_outcomes(passed=1)


# -- the core, without a subprocess -------------------------------------------------------------


@pytest.fixture
def compiled_for_sm90(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The 4-stage tile compiled as an H200 compiles it (not loaded: no GPU here)."""
    pytest.importorskip("triton")
    from matmul_kernel import compile_tile

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    return compile_tile(90, (128, 128, 64, 4))


def test_a_gpu_compile_is_judged_by_its_compile_for_the_emulated_architecture(
    compiled_for_sm90, tmp_path: Path
) -> None:
    from triton.runtime.errors import OutOfResources

    from pytest_coldcompile.devices import named
    from pytest_coldcompile.devices.emulate import Emulation

    assert compiled_for_sm90.metadata.shared == 131072
    rtx = Emulation(named.DEVICES["rtx-pro-6000-blackwell"], scratch=str(tmp_path / "tmp"))
    judged = rtx.check_compiled(compiled_for_sm90)
    assert (judged.there.arch, judged.there.shared, judged.outcome) == (120, 98304, "fits")
    assert judged.there.threads == 256 and judged.there.registers
    rtx.check_compiled(compiled_for_sm90)
    assert rtx.compiles == 1  # cached by the kernel's own key and the target

    capped_h200 = Emulation(named.DEVICES["h200"], smem_limit=101376)
    with pytest.raises(OutOfResources, match="Required: 131072, Hardware limit: 101376"):
        capped_h200.check_compiled(compiled_for_sm90)
    assert capped_h200.compiles == 0  # the same architecture: the real compile is judged


def test_on_a_gpu_a_kernel_over_the_emulated_limit_is_refused_before_it_loads(
    compiled_for_sm90, tmp_path: Path
) -> None:
    # The seam a GPU run goes through: CompiledKernel._init_handles, where Triton loads a
    # kernel. Refused there before the driver is asked for anything, so it runs without a GPU.
    from triton.runtime.errors import OutOfResources

    from pytest_coldcompile.devices import emulate, named

    installed = emulate.install(named.DEVICES["h200"], smem_limit=101376,
                                scratch=str(tmp_path / "tmp"))
    try:
        with pytest.raises(OutOfResources, match="Required: 131072, Hardware limit: 101376"):
            compiled_for_sm90._init_handles()
        assert compiled_for_sm90.module is None  # never loaded
    finally:
        installed.remove()


def test_an_architecture_this_triton_cannot_target_is_named() -> None:
    pytest.importorskip("triton")
    from pytest_coldcompile.devices import named
    from pytest_coldcompile.devices.emulate import Emulation
    from pytest_coldcompile.devices.target_compile import UnsupportedTarget

    future = named.NamedDevice("future-gpu", "A future GPU", 130, 232448, "", "")
    with pytest.raises(UnsupportedTarget, match=r"cannot emulate future-gpu \(sm_130\): Triton "
                       r"\S+ cannot target sm_130a: its ptxas \(.*\) does not list sm_130a"):
        Emulation(future).install()


@pytest.mark.requires_cuda
def test_on_a_gpu_the_report_shows_both_footprints(pytester: pytest.Pytester) -> None:
    """On an H200: the 4-stage tile fits the real GPU (131072 of 232448 bytes) and an emulated
    RTX PRO 6000 (98304 of 101376); an H200 capped at 101376 refuses it."""
    pytester.makepyfile(kernel=KERNEL)
    pytester.makepyfile(test_gpu="""
        import pytest
        import torch
        import triton
        from kernel import matmul

        def operands():
            return (torch.randn(128, 64, dtype=torch.float16, device="cuda"),
                    torch.randn(64, 128, dtype=torch.float16, device="cuda"))

        @pytest.mark.emulate_device("rtx-pro-6000-blackwell")
        def test_fits_there():
            a, b = operands()
            torch.testing.assert_close(matmul(a, b, (128, 128, 64, 4)).float(),
                                       a.float() @ b.float(), atol=0.05, rtol=0.01)

        @pytest.mark.emulate_device("h200")
        @pytest.mark.smem_limit(101376)
        def test_refused_on_a_capped_h200():
            with pytest.raises(triton.runtime.errors.OutOfResources, match="131072"):
                matmul(*operands(), (128, 128, 64, 4))
    """)
    env_interpret = os.environ.pop("TRITON_INTERPRET", None)
    try:
        result = run(pytester, "--cold-compile-report=report.json", timeout=600)
    finally:
        if env_interpret is not None:
            os.environ["TRITON_INTERPRET"] = env_interpret
    result.assert_outcomes(passed=2)
    kernels = _report(pytester)["test_gpu.py::test_fits_there"]["emulation"]["kernels"]
    assert [(k["here"]["shared"], k["there"]["shared"], k["differs"]) for k in kernels] == [
        (131072, 98304, True)]
    result.stdout.fnmatch_lines(["emulated rtx-pro-6000-blackwell (sm_120): *fits; here "
                                 "(sm_90) 131072 B*"])
