"""Named devices: --smem-limit, smem_limit(...) and ini smem_limit take a device's name, as do
--emulate-device and its marker and ini key; unknown names list the names; the plugin's table
agrees with gridpair's, with what our H200 reported, and with what Triton can target."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_coldcompile.devices import named

REPO = Path(__file__).resolve().parents[2]
NAMES = "a100, b200, h100, h200, l40s, rtx-4090, rtx-pro-6000-blackwell"

# Opt-in shared memory per block in the CUDA C++ Programming Guide's table of technical
# specifications per compute capability: 163 KB (8.0), 99 KB (8.6, 8.9, 12.x), 227 KB (9.0, 10.0).
GUIDE = {"a100": 163 * 1024, "l40s": 99 * 1024, "rtx-4090": 99 * 1024, "h100": 227 * 1024,
         "h200": 227 * 1024, "b200": 227 * 1024, "rtx-pro-6000-blackwell": 99 * 1024}



@pytest.fixture(scope="module", autouse=True)
def _triton_imported_before_inner_runs() -> None:
    """An in-process run's shared-memory cap imports triton; pytester then drops the modules
    that run added, and triton's extension cannot be imported twice in one process."""
    pytest.importorskip("triton.compiler.compiler")


STATE_TEST = """
    import pytest

    def test_default(cold_state):
        print("STATE", cold_state.smem_limit, cold_state.smem_device)

    @pytest.mark.smem_limit("a100")
    def test_marked(cold_state):
        print("STATE", cold_state.smem_limit, cold_state.smem_device)

    @pytest.mark.smem_limit(50000)
    def test_bytes(cold_state):
        print("STATE", cold_state.smem_limit, cold_state.smem_device)
"""


@pytest.mark.parametrize(
    ("args", "ini", "default_state"),
    [
        (["--smem-limit=rtx-4090"], "", "STATE 101376 rtx-4090"),
        ([], "smem_limit = H100", "STATE 232448 h100"),
        (["--smem-limit=l40s"], "smem_limit = h100", "STATE 101376 l40s"),  # CLI over ini
    ],
)
def test_smem_limit_takes_a_device_name_marker_over_command_line_over_ini(
    pytester: pytest.Pytester, args: list[str], ini: str, default_state: str
) -> None:
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(STATE_TEST)
    result = pytester.runpytest("-s", *args)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"*{default_state}", "*STATE 166912 a100", "*STATE 50000 None"])


def test_the_header_names_the_device(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--smem-limit=rtx-pro-6000-blackwell")
    result.stdout.fnmatch_lines(
        ["cold-compile:*smem limit 101376 bytes (rtx-pro-6000-blackwell's, --smem-limit)*"])


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--smem-limit=rtx-9090"], "",
         f"--smem-limit: expected a positive whole number of bytes, got 'rtx-9090'; or one of "
         f"the named devices: {NAMES}"),
        ([], "smem_limit = big-gpu",
         f"ini smem_limit: expected a positive whole number of bytes, got 'big-gpu'; or one of "
         f"the named devices: {NAMES}"),
        (["--emulate-device=h300"], "",
         f"--emulate-device: expected a device name, got unknown device 'h300'; the named "
         f"devices are: {NAMES}"),
        ([], "emulate_device = 4096",
         f"ini emulate_device: expected a device name, got unknown device '4096'; the named "
         f"devices are: {NAMES}"),
    ],
)
def test_an_unknown_device_is_a_usage_error_listing_the_names(
    pytester: pytest.Pytester, args: list[str], ini: str, message: str
) -> None:
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_an_unknown_device_in_a_marker_fails_that_test_naming_the_marker(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.smem_limit("rtx-9090")
        def test_a():
            pass

        @pytest.mark.emulate_device("h300")
        def test_b():
            pass

        def test_c():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "*smem_limit marker of test_an_unknown_device_in_a_marker*::test_a: expected a "
            f"positive whole number of bytes, got 'rtx-9090'; or one of the named devices: "
            f"{NAMES}*",
            "*emulate_device marker of test_an_unknown_device_in_a_marker*::test_b: expected a "
            f"device name, got unknown device 'h300'; the named devices are: {NAMES}*",
        ]
    )


def test_the_help_and_the_markers_document_the_names(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--smem-limit=BYTES|DEVICE*", "*--emulate-device=DEVICE*"])
    result.stdout.fnmatch_lines(["*emulate_device*"])
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["*@pytest.mark.smem_limit(BYTES): *(or a named device's, *",
                                 "*@pytest.mark.emulate_device(DEVICE)*"])


# -- the table against other sources ----------------------------------------------------------


def test_the_table_has_the_contract_names_and_the_guide_figures() -> None:
    assert {d: named.DEVICES[d].shared_per_block for d in GUIDE} == GUIDE
    for device in named.DEVICES.values():
        assert device.warp_size == 32
        assert (device.max_threads_per_block, device.registers_per_block,
                device.registers_per_thread) == (1024, 65536, 255)
        for source in (device.shared_source, device.arch_source, device.limits_source):
            assert "Guide" in source or "compute capability" in source


def test_the_table_agrees_with_gridpair_profiles() -> None:
    from gridpair import devices

    common = sorted(set(named.DEVICES) & set(devices.PROFILES))
    assert common == sorted(GUIDE)
    ours = {n: (named.DEVICES[n].arch, named.DEVICES[n].shared_per_block) for n in common}
    theirs = {n: (devices.PROFILES[n].arch, devices.PROFILES[n].shared_per_block)
              for n in common}
    assert ours == theirs


def test_the_h200_figure_is_what_our_h200_reported() -> None:
    # docs/evidence: the GPU machine's versions step prints, for each device, its index, name and
    # torch's shared_memory_per_block_optin.
    log = (REPO / "docs/evidence/h200/round11/call2/versions.log").read_text().splitlines()
    line = next(text for text in log if text.startswith("0 NVIDIA H200"))
    assert named.DEVICES["h200"].shared_per_block == int(line.split()[-1])


def test_the_register_limit_gives_the_threads_the_driver_allows() -> None:
    # CUDA Occupancy Calculator arithmetic: registers are given to a warp in units of 256, and
    # a block has 64K of them: 255 registers per thread (256 per warp lane) leave 8 warps.
    h100 = named.DEVICES["h100"]
    assert h100.max_threads_for(255) == 256
    assert h100.max_threads_for(128) == 512
    assert h100.max_threads_for(64) == 1024
    assert h100.max_threads_for(32) == 1024


@pytest.fixture(scope="module")
def probe_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def probe(x_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) + 1)

    return probe


@pytest.mark.parametrize("arch", sorted({d.arch for d in named.DEVICES.values()}))
def test_triton_compiles_for_every_architecture_in_the_table(
    probe_kernel, arch: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    kernel = triton.compile(ASTSource(probe_kernel, {"x_ptr": "*fp32", "BLOCK": "constexpr"},
                                      {"BLOCK": 128}), target=GPUTarget("cuda", arch, 32))
    assert kernel.metadata.target.arch == arch
    assert kernel.asm["cubin"][:4] == b"\x7fELF"


EMULATED_TEST = """
    import pytest

    def test_default(cold_state):
        print("EMULATED", cold_state.cold, cold_state.emulated_device, cold_state.smem_limit)

    @pytest.mark.emulate_device("h100")
    def test_marked(cold_state):
        print("EMULATED", cold_state.cold, cold_state.emulated_device, cold_state.smem_limit)
"""


@pytest.mark.parametrize(
    ("args", "default_state", "header"),
    [
        ([], "EMULATED True a100 166912", "emulating a100 (ini emulate_device)"),
        (["--emulate-device=L40S"], "EMULATED True l40s 101376",
         "emulating l40s (--emulate-device)"),
    ],
)
def test_emulate_device_marker_over_command_line_over_ini_and_runs_cold(
    pytester: pytest.Pytester, args: list[str], default_state: str, header: str
) -> None:
    pytester.makeini("[pytest]\nemulate_device = a100\n")
    pytester.makepyfile(EMULATED_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", *args, timeout=240)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"cold-compile: *{header}*"])
    result.stdout.fnmatch_lines_random([f"*{default_state}", "*EMULATED True h100 232448"])


# Issue 32's table: the tutorial's K-looped matmul, 128x128x64 tile, 4 stages, 8 warps,
# 16-byte-aligned pointers and strides, compiled with triton.compile for each GPUTarget.
ISSUE_32_SHARED = {80: 98304, 89: 98304, 90: 131072, 120: 98304}


@pytest.mark.parametrize("arch", sorted(ISSUE_32_SHARED))
def test_the_architectures_in_the_table_need_what_the_issue_measured(
    arch: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matmul_kernel import compile_tile

    assert arch in {d.arch for d in named.DEVICES.values()}
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    assert compile_tile(arch, (128, 128, 64, 4)).metadata.shared == ISSUE_32_SHARED[arch]


FAKE_H200 = """
import torch
import pytest_coldcompile.devices.cuda as cuda

cuda._probe_uncached = lambda: cuda.DeviceFacts(
    (cuda.Gpu(0, "Fake H200", 232448, 49152, (9, 0)),))
torch.version.cuda = torch.version.cuda or "12.8"  # a CUDA build, as on a GPU machine
"""


def test_requires_smem_asks_the_emulated_device(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(FAKE_H200)
    pytester.makepyfile(test_markers="""
        import pytest

        @pytest.mark.requires_smem(200000)
        def test_on_the_gpu():
            pass

        @pytest.mark.emulate_device("rtx-pro-6000-blackwell")
        @pytest.mark.requires_smem(200000)
        def test_emulated():
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", timeout=240)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*requires_smem(200000): needs 200000 bytes of shared memory per block; Fake H200 "
        "offers 232448 (opt-in), lowered to 101376 by emulate_device marker of "
        "test_markers.py::test_emulated"])
