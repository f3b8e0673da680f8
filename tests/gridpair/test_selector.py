"""The validated launch selector on the CPU, with real Triton compilation for device profiles
(GRIDPAIR_DEVICE): rejection then admission, caching of choices and failures, tuned entries,
limits, errors, the events of the selector protocol, and the specialization it validates."""

import json
import os
import subprocess

import pytest
import torch
import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource
from triton.compiler.errors import CompilationError
from triton.runtime.errors import OutOfResources

from gridpair import devices, grid_pair, reference_grid_pair, tuned, validation
from gridpair.active import using_selector
from gridpair.cubin import cubin_registers
from gridpair.geometry import Geometry, Tile, kernel_constexprs
from gridpair.kernels import KERNELS
from gridpair.ladder import generated_candidates
from gridpair.selector import LaunchSelector
from gridpair.signature import Signature, contiguous_signature
from gridpair.validation import _ast_source, max_threads

P147 = dict(degrees=49, focus=2, frames=3, channels=96, grid=584)  # production fp32 bwd2
# Where the geometry is not the point: every refusal of its ladder compiles in a fraction of
# P147's time.
SMALL = dict(degrees=16, focus=2, frames=1, channels=16, grid=32)
MEDIUM = dict(degrees=16, focus=2, frames=3, channels=32, grid=152)
SMALL_DEVICE = "rtx-pro-6000-blackwell"
LIMIT_99K = 101376
OPERAND_COUNT = {"fwd": 2, "bwd": 3, "bwd2": 5}


def launch_args(op, nodes=2, dtype=torch.float32, shape=P147, layout="contiguous"):
    d, f, k, c, g = (shape[n] for n in ("degrees", "focus", "frames", "channels", "grid"))
    if layout == "contiguous":
        coefficient = torch.zeros(nodes, d, f, k * c, dtype=dtype)
    else:  # N-dependent strides, aligned start
        coefficient = torch.zeros(d, nodes, f, k * c, dtype=dtype).transpose(0, 1)
    projector = torch.zeros(g, d * k, dtype=dtype)
    return [coefficient] * OPERAND_COUNT[op], (projector, projector), k


class Recorder:
    def __init__(self, selector):
        self.events = []
        self.unsubscribe = selector.subscribe(self.events.append)

    def kinds(self, kind):
        return [e for e in self.events if e.kind == kind]


@pytest.fixture
def compiles(monkeypatch):
    """Every Triton compile, by kernel name: finished ones and cache hits (Triton's listener),
    and those refused part-way at the shared-memory check, which never reach the listener."""
    seen = []
    monkeypatch.setattr(knobs.compilation, "listener",
                        lambda *, src, metadata, **_: seen.append(metadata["name"]))
    validation._install_early_rejection()
    make_llir = CUDABackend.make_llir

    def refused_too(self, src, metadata, *args, **kwargs):
        try:
            return make_llir(self, src, metadata, *args, **kwargs)
        except OutOfResources:
            seen.append("refused at the shared-memory check")
            raise

    monkeypatch.setattr(CUDABackend, "make_llir", refused_too)
    return seen


@pytest.fixture
def profile(monkeypatch):
    def use(name, cap=None):
        monkeypatch.setenv("GRIDPAIR_DEVICE", name)
        if cap is None:
            monkeypatch.delenv(devices.SMEM_LIMIT_ENV, raising=False)
        else:
            monkeypatch.setenv(devices.SMEM_LIMIT_ENV, str(cap))
    return use


@pytest.fixture(scope="module")
def small_device_bwd2():
    """(tile, recorder) of the production fp32 bwd2 searched on the 99 KiB profile by a
    selector of its own: searched once for the tests that read it (12-15 s on 2 cores)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRIDPAIR_DEVICE", SMALL_DEVICE)
        patch.delenv(devices.SMEM_LIMIT_ENV, raising=False)
        selector = LaunchSelector()
        recorder = Recorder(selector)
        tile = selector.choose("bwd2", *launch_args("bwd2"))
        recorder.unsubscribe()
    return tile, recorder


def test_production_fp32_bwd2_is_rejected_then_admitted_on_a_99_kib_device(small_device_bwd2):
    tile, recorder = small_device_bwd2
    probes = recorder.kinds("probe")
    admitted = recorder.kinds("admit")
    assert tile is not None
    assert len(admitted) == 1
    assert admitted[0].config == tile.as_dict()
    assert 0 < admitted[0].resources["shared"] <= LIMIT_99K
    assert admitted[0].resources["limit"] == LIMIT_99K
    # The first candidates overflow the device, a later one fits.
    assert probes[0].outcome == "out_of_resources"
    assert probes[0].resources["shared"] > LIMIT_99K
    assert all(p.outcome == "out_of_resources" for p in probes[:-1])
    assert probes[-1].outcome == "fits"
    assert probes[-1].config == tile.as_dict()
    assert not recorder.kinds("fallback")
    print("\n".join(f"{e.kind} {e.config} {e.resources} {e.outcome}" for e in recorder.events))


def test_the_h200_admits_a_larger_tile(profile, small_device_bwd2):
    _, small = small_device_bwd2
    profile("h200")
    large = Recorder(large_selector := LaunchSelector())
    large_tile = large_selector.choose("bwd2", *launch_args("bwd2"))
    small_shared = small.kinds("admit")[0].resources["shared"]
    large_shared = large.kinds("admit")[0].resources["shared"]
    assert large_shared > LIMIT_99K >= small_shared
    assert large_tile.as_dict() != small.kinds("admit")[0].config


def test_choices_differ_when_only_the_limit_differs(profile):
    # The medium geometry's fp32 bwd2 ladder starts with a 38912-byte tile, then a 34816 one.
    args = launch_args("bwd2", shape=MEDIUM)
    profile("h200")
    uncapped = LaunchSelector().choose("bwd2", *args)
    profile("h200", cap=36000)
    capped = LaunchSelector()
    recorder = Recorder(capped)
    assert capped.choose("bwd2", *args) != uncapped
    assert recorder.kinds("admit")[0].resources["limit"] == 36000


def test_a_cached_choice_compiles_nothing(profile, compiles):
    profile(SMALL_DEVICE)
    selector = LaunchSelector()
    recorder = Recorder(selector)
    first = selector.choose("fwd", *launch_args("fwd", dtype=torch.bfloat16))
    assert compiles and first is not None
    compiles.clear()
    recorder.events.clear()
    # Another node count and a degree-major view: the same key (N and strides are not in it).
    again = selector.choose("fwd", *launch_args("fwd", nodes=7, dtype=torch.bfloat16,
                                                 layout="degree_major"))
    assert again == first
    assert compiles == []
    assert [(e.kind, e.outcome) for e in recorder.events] == [("admit", "cached")]


def test_a_cached_exhausted_search_compiles_nothing_and_the_op_falls_back(profile, compiles):
    profile(SMALL_DEVICE, cap=1024)  # no tile of the small geometry fits in 1 KiB
    selector = LaunchSelector()
    recorder = Recorder(selector)
    assert selector.choose("fwd", *launch_args("fwd", dtype=torch.bfloat16, shape=SMALL)) is None
    assert compiles
    assert all(p.outcome == "out_of_resources" for p in recorder.kinds("probe"))
    assert [e.outcome for e in recorder.kinds("fallback")] == ["out_of_resources"]
    compiles.clear()
    recorder.events.clear()
    left = torch.randn(3, 16, 2, 16, dtype=torch.bfloat16)  # the same key: another N
    projector = torch.randn(32, 16, dtype=torch.bfloat16)
    with using_selector(selector):
        out = grid_pair(left, left, projector, projector, 1)
    assert compiles == []
    assert [(e.kind, e.outcome) for e in recorder.events] == [("fallback", "cached")]
    torch.testing.assert_close(out, reference_grid_pair(left, left, projector, projector, 1))


def test_reset_forgets_choices_and_failures(profile, compiles):
    selector = LaunchSelector()
    args = launch_args("fwd", dtype=torch.bfloat16, shape=SMALL)
    limits = {"failure": 1024, "choice": None}  # no tile of the small geometry fits in 1 KiB
    chosen = {}
    for name, cap in limits.items():
        profile(SMALL_DEVICE, cap=cap)
        chosen[name] = selector.choose("fwd", *args)
    assert chosen["failure"] is None and chosen["choice"] is not None
    assert sorted(d.admitted is None for d in selector.cached()) == [False, True]
    selector.reset()
    assert not list(selector.cached())
    for name, cap in limits.items():
        profile(SMALL_DEVICE, cap=cap)
        compiles.clear()
        assert selector.choose("fwd", *args) == chosen[name]
        assert compiles, name  # searched again, not read from a forgotten decision


def test_a_non_resource_compile_error_propagates_and_is_not_cached(profile, monkeypatch):
    profile(SMALL_DEVICE)
    # 24 rows: tl.arange needs a power of two, so Triton's front end refuses the kernel.
    monkeypatch.setattr(
        "gridpair.ladder.generated_candidates", lambda *args: [Tile(24, 16, 2, 4)]
    )
    selector = LaunchSelector()
    for _ in range(2):
        with pytest.raises(CompilationError):
            selector.choose("fwd", *launch_args("fwd", dtype=torch.bfloat16))
    assert not list(selector.cached())


def test_a_tuned_entry_that_no_longer_fits_is_rejected_and_the_next_admitted(profile,
                                                                            monkeypatch):
    profile(SMALL_DEVICE)
    name = devices.PROFILES[SMALL_DEVICE].device_name
    geometry = (P147["degrees"], P147["focus"], P147["frames"], P147["channels"], P147["grid"])
    too_big = Tile(64, 64, 3, 8)
    ladder = generated_candidates("fwd", Geometry(**P147), torch.bfloat16)
    assert too_big in ladder  # and so it must appear once only
    monkeypatch.setitem(tuned.TUNED, (name, "fwd", torch.bfloat16, geometry), (too_big,))
    selector = LaunchSelector()
    recorder = Recorder(selector)
    tile = selector.choose("fwd", *launch_args("fwd", dtype=torch.bfloat16))
    probes = recorder.kinds("probe")
    assert probes[0].config == too_big.as_dict()
    assert probes[0].outcome == "out_of_resources"
    assert [p.config for p in probes].count(too_big.as_dict()) == 1
    assert tile is not None
    assert tile != too_big


def test_tuned_entries_come_first_and_are_validated(profile, monkeypatch):
    profile("h200")
    geometry = (49, 2, 3, 96, 584)
    preferred = Tile(32, 16, 2, 4)
    monkeypatch.setitem(tuned.TUNED, ("NVIDIA H200", "fwd", torch.bfloat16, geometry),
                        (preferred,))
    selector = LaunchSelector()
    recorder = Recorder(selector)
    assert selector.choose("fwd", *launch_args("fwd", dtype=torch.bfloat16)) == preferred
    assert [p.config for p in recorder.kinds("probe")] == [preferred.as_dict()]


def _tuned_entry(**changes):
    entry = {"device": "NVIDIA H200", "op": "fwd", "dtype": "bfloat16", "geometry": dict(P147),
             "tiles": [{"block_rows": 32, "block_grid": 16, "num_stages": 2, "num_warps": 4}]}
    entry.update(changes)
    return entry


def test_a_tuned_tiles_file_comes_before_the_table(profile, monkeypatch, tmp_path):
    profile("h200")
    path = tmp_path / "tiles.json"
    path.write_text(json.dumps([_tuned_entry()]))
    monkeypatch.setenv(tuned.TUNED_TILES_ENV, str(path))
    # A built-in table of known content, so the order is checked against literals.
    shape = tuple(P147.values())
    table_fwd, table_bwd = Tile(64, 64, 3, 4), Tile(16, 16, 1, 4)
    monkeypatch.setattr(tuned, "TUNED", {("NVIDIA H200", "fwd", torch.bfloat16, shape): (
        table_fwd,), ("NVIDIA H200", "bwd", torch.bfloat16, shape): (table_bwd,)})
    preferred = Tile(32, 16, 2, 4)
    assert tuned.lookup("NVIDIA H200", "fwd", torch.bfloat16, Geometry(**P147)) == (
        preferred, table_fwd)
    selector = LaunchSelector()
    recorder = Recorder(selector)
    assert selector.choose("fwd", *launch_args("fwd", dtype=torch.bfloat16)) == preferred
    assert [p.config for p in recorder.kinds("probe")] == [preferred.as_dict()]
    # Other ops, dtypes and devices are untouched by the file.
    assert tuned.lookup("NVIDIA H200", "bwd", torch.bfloat16, Geometry(**P147)) == (table_bwd,)
    assert tuned.lookup("NVIDIA H100", "fwd", torch.bfloat16, Geometry(**P147)) == ()


@pytest.mark.parametrize(("entries", "message"), [
    ("not json", "cannot read a JSON"),
    ({"device": "x"}, "expected a JSON list"),
    ([_tuned_entry(op="bwd3")], "op 'bwd3' is not one of"),
    ([_tuned_entry(dtype="bf16")], "dtype 'bf16' is not a torch dtype"),
    ([{"op": "fwd"}], "entry 0: missing device, dtype, geometry, tiles"),
    ([_tuned_entry(tiles=[{"block_rows": 32}])], "entry 0: bad geometry or tile"),
    ([_tuned_entry(geometry={"degrees": 49})], "entry 0: bad geometry or tile"),
    ([_tuned_entry(tiles=[{"block_rows": 0, "block_grid": 16, "num_stages": 2,
                           "num_warps": 4}])], "needs positive integers"),
    ([_tuned_entry(tiles=[{"block_rows": 16, "block_grid": 16, "num_stages": 2,
                           "num_warps": 4, "fp32_dots": "tf32"}])], "fp32_dots 'tf32'"),
    ([_tuned_entry(tiles=[{"block_rows": 24, "block_grid": 16, "num_stages": 2,
                           "num_warps": 4}])],
     r"entry 0, tile 0 .*block_rows=24: expected a power of two >= 16"),
    ([_tuned_entry(), _tuned_entry(tiles=[
        {"block_rows": 16, "block_grid": 16, "num_stages": 2, "num_warps": 4},
        {"block_rows": 16, "block_grid": 8, "num_stages": 2, "num_warps": 4}])],
     r"entry 1, tile 1 .*block_grid=8: expected a power of two >= 16"),
    ([_tuned_entry(tiles=[{"block_rows": 16, "block_grid": 16, "num_stages": 2,
                           "num_warps": 6}])], r"num_warps=6: expected a power of two"),
    ([_tuned_entry(tiles=[{"block_rows": 16, "block_grid": 16, "num_stages": 2,
                           "num_warps": 64}])], r"num_warps=64: expected a power of two"),
    ([_tuned_entry(tiles=[{"block_rows": 16, "block_grid": 16, "num_stages": -1,
                           "num_warps": 4}])], "needs positive integers"),
    ([_tuned_entry(tiles=[{"block_rows": 16, "block_grid": 16, "num_stages": 2,
                           "num_warps": 4, "fp32_dots": "ieee"}])],
     r"fp32_dots='ieee': applies to float32 only, not torch\.bfloat16"),
    ([_tuned_entry(dtype="float64")], "dtype 'float64' has no fused kernel"),
])
def test_a_bad_tuned_tiles_file_names_what_is_wrong(tmp_path, monkeypatch, entries, message):
    path = tmp_path / "tiles.json"
    path.write_text(entries if isinstance(entries, str) else json.dumps(entries))
    monkeypatch.setenv(tuned.TUNED_TILES_ENV, str(path))
    with pytest.raises(ValueError, match=message) as raised:
        tuned.lookup("NVIDIA H200", "fwd", torch.bfloat16, Geometry(**P147))
    assert f"{tuned.TUNED_TILES_ENV}={path}" in str(raised.value)


def test_an_edited_tuned_tiles_file_is_read_again(tmp_path, monkeypatch):
    path = tmp_path / "tiles.json"
    monkeypatch.setenv(tuned.TUNED_TILES_ENV, str(path))
    key = ("NVIDIA H100", "fwd", torch.bfloat16, Geometry(**P147))
    for tile in (Tile(32, 16, 2, 4), Tile(64, 32, 3, 8)):
        path.write_text(json.dumps([_tuned_entry(device="NVIDIA H100",
                                                 tiles=[tile.as_dict()])]))
        assert tuned.lookup(*key) == (tile,)
    path.write_text("[]")
    assert tuned.lookup(*key) == ()


BROKEN_TILES = [Tile(24, 16, 1, 4), Tile(16, 8, 1, 4), Tile(16, 16, 1, 6)]


def test_the_tuned_file_rules_are_the_compilers(profile):
    """The loader's rules against Triton itself: the tiles it rejects do not compile, their
    nearest legal neighbour does (a profile compile, no GPU needed)."""
    from gridpair.validation import compile_candidate

    profile("h100")
    geometry = Geometry(4, 1, 1, 16, 16)
    signature = contiguous_signature("fwd", geometry, torch.bfloat16, 2)
    limits = devices.limits_for(torch.device("cpu"))
    compile_candidate("fwd", geometry, Tile(16, 16, 1, 4), signature, limits)
    for tile in BROKEN_TILES:
        assert tuned.tile_rule_broken(tile, torch.bfloat16) is not None, tile
        with pytest.raises((CompilationError, AssertionError)):
            compile_candidate("fwd", geometry, tile, signature, limits)
    for (_, _, dtype, _), tiles in tuned.TUNED.items():
        assert all(tuned.tile_rule_broken(tile, dtype) is None for tile in tiles), tiles


def test_no_fused_kernel_for_float64_falls_back_without_compiling(profile, compiles):
    profile(SMALL_DEVICE)
    selector = LaunchSelector()
    recorder = Recorder(selector)
    assert selector.choose("fwd", *launch_args("fwd", dtype=torch.float64)) is None
    assert compiles == []
    assert [(e.kind, e.outcome) for e in recorder.events] == [("fallback", "unsupported_dtype")]


def test_without_a_gpu_or_profile_nothing_is_selected(monkeypatch, compiles):
    monkeypatch.delenv("GRIDPAIR_DEVICE", raising=False)
    selector = LaunchSelector()
    recorder = Recorder(selector)
    assert selector.choose("fwd", *launch_args("fwd")) is None
    assert compiles == []
    assert recorder.events == []


def test_fake_tensors_select_like_real_ones(profile, compiles):
    from torch._subclasses.fake_tensor import FakeTensorMode

    profile(SMALL_DEVICE)
    selector = LaunchSelector()
    real = selector.choose("fwd", *launch_args("fwd", dtype=torch.bfloat16))
    compiles.clear()
    with FakeTensorMode() as mode:
        operands, projectors, frames = launch_args("fwd", nodes=5, dtype=torch.bfloat16)
        fake = selector.choose("fwd", [mode.from_tensor(x) for x in operands],
                               [mode.from_tensor(p) for p in projectors], frames)
    assert fake == real
    assert compiles == []


def test_subscribe_and_unsubscribe(profile):
    profile(SMALL_DEVICE, cap=4096)
    selector = LaunchSelector()
    recorder = Recorder(selector)
    recorder.unsubscribe()
    selector.choose("fwd", *launch_args("fwd", dtype=torch.bfloat16, shape=SMALL))
    assert recorder.events == []
    assert selector.name == "gridpair"


def test_an_unknown_profile_names_the_known_ones(monkeypatch):
    monkeypatch.setenv("GRIDPAIR_DEVICE", "h300")
    with pytest.raises(ValueError, match=r"GRIDPAIR_DEVICE: unknown device profile 'h300'; "
                                         r"expected one of: .*"
                                         r"rtx-pro-6000-blackwell"):
        LaunchSelector().choose("fwd", *launch_args("fwd"))


def test_a_bad_cap_is_named(monkeypatch):
    monkeypatch.setenv("GRIDPAIR_DEVICE", "h200")
    monkeypatch.setenv(devices.SMEM_LIMIT_ENV, "lots")
    with pytest.raises(ValueError, match="PYTEST_COLDCOMPILE_SMEM_LIMIT: expected a byte"):
        LaunchSelector().choose("fwd", *launch_args("fwd"))


# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": shared
# memory per SM in KB by compute capability; a block may opt in to all of it but the 1 KB the
# system reserves per block.
SHARED_PER_SM_KB = {80: 164, 86: 100, 87: 164, 89: 100, 90: 228, 100: 228, 103: 228, 120: 100}
# NVIDIA's CUDA GPUs list: compute capability by product family, matched in the device name.
FAMILY_ARCH = {"A100": 80, "L40S": 89, "RTX 4090": 89, "H100": 90, "H200": 90, "B200": 100,
               "RTX PRO 6000 Blackwell": 120}


@triton.jit
def _copy(x, n):
    i = triton.language.arange(0, 16)
    triton.language.store(x + i, triton.language.load(x + i, mask=i < n), mask=i < n)


def test_profiles():
    """Each profile against rules that do not come from the table: its arch is its product
    family's, Triton compiles for it, and its per-block limit is the guide's opt-in maximum."""
    assert {"h100", "h200", "a100", "l40s", "b200"} <= set(devices.PROFILES)
    for name, profile in devices.PROFILES.items():
        families = [f for f in FAMILY_ARCH if f in profile.device_name]
        assert len(families) == 1, (name, profile.device_name)
        assert profile.arch == FAMILY_ARCH[families[0]], name
        assert profile.shared_per_block == (SHARED_PER_SM_KB[profile.arch] - 1) * 1024, name
        assert "Programming Guide" in profile.source
        compiled = triton.compile(
            ASTSource(_copy, {"x": "*fp32", "n": "i32"}, {}, {}),
            target=GPUTarget("cuda", profile.arch, 32))
        assert compiled.kernel[:4] == b"\x7fELF"
        assert compiled.metadata.target.arch == profile.arch
    # The oracle itself refuses an architecture that does not exist.
    with pytest.raises(Exception, match=r"sm_999|PTXAS|ptxas"):
        triton.compile(ASTSource(_copy, {"x": "*fp32", "n": "i32"}, {}, {}),
                       target=GPUTarget("cuda", 999, 32))


# A class of every kind for each operand's four strides, rotated per operand.
STRIDE_CLASSES = [("i32:16", "i32:16", "i32", "1"), ("i64:16", "i32", "i64", "1"),
                  ("i32", "i32:16", "i32:16", "i32")]


@pytest.mark.parametrize("rows", ["i32:16", "i32", "i64:16"])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("op", ["fwd", "bwd2"])
def test_the_profile_source_specializes_what_a_launch_does(op, aligned, rows):
    """What a profile compile specializes, stated here: the first operand's 16-byte alignment
    only where it is aligned, every other pointer aligned (padded projectors and fresh results),
    the tile and geometry as constants, and each launch scalar by its class: 1 a constant,
    32 or 64 bits, a multiple of 16 or not."""
    kernel = KERNELS[op]
    geometry, tile = Geometry(**P147), Tile(32, 32, 2, 4)
    n_operands = OPERAND_COUNT[op]
    strides = [STRIDE_CLASSES[i % 3] for i in range(n_operands)]
    classes = (rows, *(c for four in strides for c in four))
    signature = Signature(torch.bfloat16, (aligned,) + (True,) * (n_operands - 1), False,
                          classes)
    source = _ast_source(op, geometry, tile, signature)
    constants = kernel_constexprs(geometry, tile, torch.bfloat16, False)
    pointers = n_operands + 2 + {"fwd": 1, "bwd2": 3}[op]
    runtime = [name for name in kernel.arg_names if name not in constants]
    scalars = runtime[pointers:]
    assert len(scalars) == 1 + 4 * n_operands  # the row count and four strides each
    assert {name: source.signature[name] for name in runtime[:pointers]} == {
        name: "*bf16" for name in runtime[:pointers]}
    ones = {name for name, c in zip(scalars, classes, strict=True) if c == "1"}
    assert ones == {kernel.arg_names[i].replace("_ptr", "_stride_c") for i in range(n_operands)
                    if i % 3 != 2}
    assert {kernel.arg_names[path[0]]: value for path, value in source.constants.items()} == (
        constants | dict.fromkeys(ones, 1))
    assert {name: source.signature[name] for name in scalars if name not in ones} == {
        name: c.split(":")[0] for name, c in zip(scalars, classes) if c != "1"}
    divisible = {kernel.arg_names[path[0]] for path, entries in source.attrs.items()
                 if ["tt.divisibility", 16] in entries}
    assert divisible == set(runtime[int(not aligned):pointers]) | {
        name for name, c in zip(scalars, classes) if c.endswith(":16")}


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("op", ["fwd", "bwd", "bwd2"])
def test_every_class_of_launch_scalar_compiles(op, wide, profile):
    """Each kernel compiles (for a profile: no GPU needed) with launch scalars of every class,
    a unit stride among them, in 32- and 64-bit offsets: a class the launch can meet must not
    be a compile error first seen on a GPU."""
    from gridpair.validation import compile_candidate

    profile("h200")
    n_operands = OPERAND_COUNT[op]
    # Every class, and every stride the constant 1 (an operand with unit D, F and C axes).
    patterns = [*STRIDE_CLASSES, ("1", "1", "1", "1")]
    strides = [patterns[(i - 1) % 4] for i in range(n_operands)]  # all ones first
    signature = Signature(torch.bfloat16, (True,) * n_operands, wide,
                          ("i64:16" if wide else "1", *(c for four in strides for c in four)))
    limits = devices.limits_for(torch.device("cpu"))
    compiled = compile_candidate(op, Geometry(4, 2, 3, 16, 32), Tile(16, 16, 1, 4), signature,
                                 limits)
    assert compiled.shared > 0


LAYOUTS = ["contiguous", "degree_major", "channel_strided", "offset", "one_node", "odd_nodes"]


def _operands(layout, op):
    """Real CPU operands of ``op`` for a small geometry (D=4, F=2, K=1, C=24) in ``layout``."""
    nodes = {"one_node": 1, "odd_nodes": 3}.get(layout, 8)
    shape = (nodes, 4, 2, 24)

    def one(seed):
        if layout == "degree_major":
            return torch.zeros(4, nodes, 2, 24).transpose(0, 1)
        if layout == "channel_strided":
            return torch.zeros(*shape[:3], 48)[..., ::2]
        if layout == "offset":  # seed elements in: 16-byte aligned for seeds 0 and 4
            return torch.zeros(seed + torch.Size(shape).numel())[seed:].view(shape)
        return torch.zeros(shape)

    return [one(seed) for seed in range(OPERAND_COUNT[op])], Geometry(4, 2, 1, 24, 16)


def _binder_agrees(op, signature, launched, geometry, result_dtypes):
    """Whether Triton's JIT binder specializes the validation compile's placeholders for
    ``signature`` exactly as the real launch of ``launched`` operands (the tensors the kernel
    gets) with fresh results of ``result_dtypes`` and padded projectors."""
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    from gridpair.geometry import kernel_arguments
    from gridpair.launch import pad_projector
    from gridpair.validation import _placeholder_arguments

    compute = signature.dtype
    projectors = [pad_projector(torch.zeros(16, geometry.slots, dtype=compute))
                  for _ in range(2)]
    results = [torch.empty(launched[0].shape, dtype=dtype) for dtype in result_dtypes]
    n_rows = launched[0].shape[0] * geometry.focus * geometry.channels
    real = kernel_arguments(launched, projectors, results, n_rows,
                            [x.stride() for x in launched])
    kernel = KERNELS[op]
    binder = create_function_from_signature(kernel.signature, kernel.params,
                                            make_backend(GPUTarget("cuda", 90, 32)))
    constants = kernel_constexprs(geometry, Tile(16, 16, 1, 4), compute, False)
    _, specialized, _ = binder(*real, **constants)
    _, validated, _ = binder(*_placeholder_arguments(op, signature), **constants)
    return validated == specialized


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", ["fwd", "bwd2"])
def test_the_signature_is_the_specialization_of_tritons_own_binder(op, layout):
    """A launch's Signature against Triton's JIT binder on the launch's real arguments: the
    validation compile's placeholders specialize every argument as the real launch does."""
    from gridpair.signature import signature_of

    operands, geometry = _operands(layout, op)
    signature = signature_of(operands, geometry)
    assert _binder_agrees(op, signature, operands, geometry,
                          [torch.float32] * {"fwd": 1, "bwd2": 3}[op])
    if layout == "offset":  # the operands' alignment is in it too
        assert signature.aligned == tuple(seed % 4 == 0 for seed in range(len(operands)))


# Autocast's launches: the forward's result in bfloat16, each gradient in its operand's dtype
# (float32 coefficients, a bfloat16 cotangent).
MIXED_RESULTS = {"fwd": [torch.bfloat16], "bwd2": [torch.bfloat16, torch.float32, torch.float32]}


@pytest.mark.parametrize("op", ["fwd", "bwd2"])
def test_a_mixed_precision_signature_is_tritons_specialization_too(op):
    """As autocast launches real tensors: float32 coefficients read as they are, a bfloat16
    cotangent and projectors."""
    from gridpair.signature import signature_of

    half = torch.bfloat16
    operands, geometry = _operands("contiguous", op)
    if op == "bwd2":
        operands[0] = operands[0].to(half)
    signature = signature_of(operands, geometry, half)
    assert signature.dtype == half and signature.operand_dtypes == tuple(
        x.dtype for x in operands)
    assert _binder_agrees(op, signature, operands, geometry, MIXED_RESULTS[op])
    # One dtype throughout is the plain key, however it is formed.
    assert signature_of([x.to(half) for x in operands], geometry, half) == signature_of(
        [x.to(half) for x in operands], geometry)


@pytest.mark.parametrize("layout", ["channel_strided", "degree_major", "offset"])
@pytest.mark.parametrize("op", ["fwd", "bwd2"])
def test_a_traced_mixed_precision_launch_is_specialized_as_cast(op, layout):
    """Traced, float32 operands are cast to fresh contiguous bfloat16 tensors before the launch
    (Inductor fuses the cast), and the kernel stores the gradients in float32. The signature
    formed from the traced operands is the binder's specialization of that launch: bfloat16
    operand pointers, aligned, with contiguous strides whatever the float32 operand's layout."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gridpair.launch import cast_for_launch
    from gridpair.signature import signature_of

    half = torch.bfloat16
    operands, geometry = _operands(layout, op)
    if op == "bwd2":
        operands[0] = operands[0].to(half)  # a cotangent already in bfloat16 is not cast
    with FakeTensorMode() as mode:
        traced = signature_of([mode.from_tensor(x) for x in operands], geometry, half)
    assert not traced.rounded_on_load and traced.dtype == half
    assert traced.operand_dtypes == tuple(x.dtype for x in operands)
    cast = cast_for_launch(operands, half)
    if layout != "offset":
        assert cast[-1].stride() != operands[-1].stride()  # the cast changed the layout
    assert _binder_agrees(op, traced, cast, geometry, MIXED_RESULTS[op])
    # The same operands as real tensors are another launch: read as float32, rounded on load.
    real = signature_of(operands, geometry, half)
    assert real.rounded_on_load and real != traced


def _symbolic(shape, dynamic=0):
    """A fake tensor whose dimension ``dynamic`` (None: none) is a symbol with hint
    shape[dynamic], as Dynamo and make_fx trace it."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    dims = [DimDynamic.DYNAMIC if d == dynamic else DimDynamic.STATIC for d in range(4)]
    return FakeTensorMode(shape_env=ShapeEnv()).from_tensor(
        torch.zeros(shape), symbolic_context=StatelessSymbolicContext(dynamic_sizes=dims))


def test_a_traced_launch_is_specialized_by_what_is_statically_known():
    """Under tracing the row count and strides are symbols: a class is what holds for every
    value of N (what Inductor compiles), never what the hint happens to satisfy."""
    from gridpair.signature import signature_of

    # F*C = 2*24: rows 48*N, a multiple of 16 for every N; channel stride 1, a constant.
    x = _symbolic((8, 4, 2, 24))
    assert signature_of([x, x], Geometry(4, 2, 1, 24, 16)).scalars == (
        "i32:16", *("i32:16", "i32:16", "i32", "1") * 2)
    # F*C = 1*9 with N = 16: 144 rows now, but 9*N is not a multiple of 16 for every N.
    x = _symbolic((16, 4, 1, 9))
    assert signature_of([x, x], Geometry(4, 1, 1, 9, 16)).scalars[0] == "i32"
    # The same shape with N static: the value decides.
    x = _symbolic((16, 4, 1, 9), dynamic=None)
    assert signature_of([x, x], Geometry(4, 1, 1, 9, 16)).scalars[0] == "i32:16"
    # Degree-major (N, D, F, KC) view of (D, N, F, KC): stride_d = 2*24*N, a multiple of 16
    # for every N; stride_f = 24 is not one.
    x = _symbolic((4, 8, 2, 24), dynamic=1).transpose(0, 1)
    assert signature_of([x, x], Geometry(4, 2, 1, 24, 16)).scalars[1:5] == (
        "i32:16", "i32:16", "i32", "1")
    assert type(x.stride(1)) is torch.SymInt


def test_register_count_and_thread_limit(tmp_path):
    source = _ast_source("fwd", Geometry(**P147), Tile(16, 32, 2, 4),
                         contiguous_signature("fwd", Geometry(**P147), torch.bfloat16, 300))
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4, "num_stages": 2})
    cubin = tmp_path / "kernel.cubin"
    cubin.write_bytes(compiled.kernel)
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
    usage = subprocess.run([cuobjdump, "--dump-resource-usage", str(cubin)],
                           capture_output=True, text=True, check=True).stdout
    assert f"REG:{cubin_registers(compiled.kernel)} " in usage
    assert (max_threads(255), max_threads(128), max_threads(64)) == (256, 512, 1024)
