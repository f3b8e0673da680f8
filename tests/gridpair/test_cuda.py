"""The fused path on a CUDA device: numerics of all three kernels against float64 (fp32 and
bf16 autocast, contiguous and degree-major), and the selector through real handle loading.
CI has no GPU: these carry requires_cuda; their output lives under docs/evidence/."""

import contextlib
import statistics

import pytest
import torch
from triton import knobs

import gridpair
from gridpair import grid_pair, reference_grid_pair
from gridpair.active import using_selector
from gridpair.selector import LaunchSelector
from numerics import QUANTITIES, draw, force_quantities, force_step, relative_error

pytestmark = pytest.mark.requires_cuda

LMAX_SHAPES = [(3, 3, 2, 32, 152), (5, 3, 2, 64, 344), (5, 3, 1, 64, 344), (6, 3, 2, 96, 460),
               (6, 3, 2, 96, 584)]  # (lmax, K, F, C, G)


def _autocast(fn):
    def run(*args):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return fn(*args)

    return run


@pytest.fixture(autouse=True)
def _ieee_references():
    # The fp32 reference must be IEEE fp32 (TF32 off) to be a fair yardstick.
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


@pytest.mark.parametrize("shape", LMAX_SHAPES, ids=lambda s: "l{}-K{}-F{}-C{}-G{}".format(*s))
@pytest.mark.parametrize("layout", ["contiguous", "degree_major"])
@pytest.mark.parametrize("precision", ["float32", "bf16-amp"])
def test_fused_within_five_times_the_reference_error(shape, layout, precision):
    lmax, frames, focus, channels, grid = shape
    fused_err = {name: [] for name in QUANTITIES}
    ref_err = {name: [] for name in QUANTITIES}
    for draw_index in range(3):
        ops = draw(300, (lmax + 1) ** 2, focus, frames, channels, grid, seed=100 + draw_index,
                   layout=layout, device="cuda")
        exact = force_quantities(reference_grid_pair, ops)
        working = ops.to(torch.float32)
        if precision == "bf16-amp":
            fused = force_quantities(_autocast(grid_pair), working)
            reference = force_quantities(_autocast(reference_grid_pair), working)
            assert fused["out"].dtype == torch.bfloat16
        else:
            fused = force_quantities(grid_pair, working)
            reference = force_quantities(reference_grid_pair, working)
        for name in QUANTITIES:
            fused_err[name].append(relative_error(fused[name], exact[name]))
            ref_err[name].append(relative_error(reference[name], exact[name]))
    report = {n: (statistics.median(fused_err[n]), statistics.median(ref_err[n]))
              for n in QUANTITIES}
    print(f"{precision} {layout} {shape}: " + ", ".join(
        f"{n} fused {f:.2e} / ref {r:.2e}" for n, (f, r) in report.items()))
    for name, (fused_median, ref_median) in report.items():
        assert fused_median <= 5 * ref_median, (name, report)


def _fixed_weight_second_order(fn, ops):
    """g2_l, g2_r of a force loss whose energy weights need no gradient: the second backward
    the ops run through the bwd kernel on (go, h_l, h_r)."""
    left = ops.left.detach().requires_grad_()
    right = ops.right.detach().requires_grad_()
    out = fn(left, right, ops.to_grid, ops.from_grid, ops.n_frames)
    grad_left, grad_right = torch.autograd.grad(out, (left, right), ops.cotangent,
                                                create_graph=True)
    loss = (grad_left * ops.grad_grad_left).sum() + (grad_right * ops.grad_grad_right).sum()
    return torch.autograd.grad(loss, (left, right))


@pytest.mark.parametrize("layout", ["contiguous", "degree_major"])
@pytest.mark.parametrize("precision", ["float32", "bf16-amp"])
def test_fixed_weight_second_order_within_five_times_the_reference_error(layout, precision):
    events = []
    unsubscribe = gridpair.SELECTOR.subscribe(events.append)
    try:
        ops = draw(300, 49, 2, 3, 96, 584, seed=31, layout=layout, device="cuda")
        exact = _fixed_weight_second_order(reference_grid_pair, ops)
        working = ops.to(torch.float32)
        wrap = _autocast if precision == "bf16-amp" else (lambda fn: fn)
        fused = _fixed_weight_second_order(wrap(grid_pair), working)
        reference = _fixed_weight_second_order(wrap(reference_grid_pair), working)
    finally:
        unsubscribe()
    assert {e.op for e in events if e.kind == "admit"} <= {"fwd", "bwd"}
    assert "bwd2" not in {e.op for e in events}
    floor = 4 * torch.finfo(torch.float32).eps
    for name, got, ref, want in zip(("grad2_left", "grad2_right"), fused, reference, exact):
        fused_error, own = relative_error(got, want), relative_error(ref, want)
        print(f"{precision} {layout} {name}: fused {fused_error:.2e} reference {own:.2e}")
        assert fused_error <= 5 * max(own, floor), (name, fused_error, own)


def test_the_fused_kernels_actually_ran():
    events = []
    unsubscribe = gridpair.SELECTOR.subscribe(events.append)
    try:
        ops = draw(300, 49, 2, 3, 96, 584, seed=5, device="cuda").to(torch.float32)
        force_quantities(grid_pair, ops)
    finally:
        unsubscribe()
    admitted = {e.op for e in events if e.kind == "admit"}
    assert admitted == {"fwd", "bwd", "bwd2"}, events
    assert not [e for e in events if e.kind == "fallback"], events


class _CompileCounter:
    """Triton compilations (cache misses) and cache hits, by kernel name."""

    def __init__(self):
        self.compiled, self.hits = [], []

    def __call__(self, *, src, metadata, metadata_group, times, cache_hit):
        (self.hits if cache_hit else self.compiled).append((metadata["name"], metadata["shared"]))


@pytest.fixture
def triton_compiles(tmp_path, monkeypatch):
    monkeypatch.setattr(knobs.cache, "dir", str(tmp_path))  # empty Triton cache: misses count
    counter = _CompileCounter()
    monkeypatch.setattr(knobs.compilation, "listener", counter)
    return counter


@pytest.mark.cold_compile  # a process that compiled nothing: every compile shows
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_compile_per_probe_and_none_at_launch(triton_compiles, dtype):
    """Eager: validation compiles each probed candidate once; the launch reuses the admitted
    one (the validated artifact is the one that runs)."""
    selector = LaunchSelector()
    events = []
    selector.subscribe(events.append)
    ops = draw(300, 49, 2, 3, 96, 584, seed=6, device="cuda").to(dtype)
    operands = [ops.left, ops.right]
    projectors = [ops.to_grid.contiguous(), ops.from_grid.contiguous()]
    tile = selector.choose("fwd", operands, projectors, 3)
    probes = [e for e in events if e.kind == "probe"]
    assert tile is not None and len(triton_compiles.compiled) == len(probes)
    before = len(triton_compiles.compiled)
    gridpair.launch.launch("fwd", operands, *projectors, 3, tile)
    torch.cuda.synchronize()
    assert len(triton_compiles.compiled) == before, triton_compiles.compiled[before:]
    # A second batch size and a degree-major view: no new compile, no new probe.
    other = draw(77, 49, 2, 3, 96, 584, seed=7, layout="degree_major_aligned",
                 device="cuda").to(dtype)
    assert selector.choose("fwd", [other.left, other.right], projectors, 3) == tile
    gridpair.launch.launch("fwd", [other.left, other.right], *projectors, 3, tile)
    torch.cuda.synchronize()
    assert len(triton_compiles.compiled) == before
    assert len([e for e in events if e.kind == "probe"]) == len(probes)


@pytest.mark.cold_compile
@pytest.mark.parametrize("precision", ["float32", "bf16-amp"])
def test_the_eager_path_runs_the_validated_kernels_and_agrees_with_the_ops(triton_compiles,
                                                                         precision):
    """grid_pair on real CUDA tensors takes gridpair.eager: every launch is asked of the selector
    first, compiles nothing beyond its probes, and matches the custom-op chain within the
    working precision's bound (kernels may differ only in the order they sum)."""
    from gridpair.inputs import check_operands

    selector = LaunchSelector()
    events = []
    selector.subscribe(events.append)
    direct = []
    real_launch = gridpair.launch._launch_resolved

    def spy(kernel, memo, *args, **kwargs):  # every direct CUDA launch, memo = (key, tile)
        direct.append(memo[0].op)
        return real_launch(kernel, memo, *args, **kwargs)

    def through_ops(left, right, to_grid, from_grid, n_frames):
        check_operands(left, right, to_grid, from_grid, n_frames)
        return torch.ops.gridpair.grid_pair_fwd(left, right, to_grid, from_grid, n_frames)

    ops = draw(300, 49, 2, 3, 96, 584, seed=9, device="cuda").to(torch.float32)
    amp = (torch.autocast("cuda", dtype=torch.bfloat16) if precision == "bf16-amp"
           else contextlib.nullcontext())
    gridpair.launch._launch_resolved = spy
    try:
        with using_selector(selector), amp:
            eager = force_quantities(grid_pair, ops)
            torch.cuda.synchronize()
            probes = [e for e in events if e.kind == "probe"]
            assert len(triton_compiles.compiled) == len(probes) > 0
            assert direct == ["fwd", "bwd", "bwd2"]
            assert [e.op for e in events if e.kind == "admit"] == direct
            through = force_quantities(through_ops, ops)
    finally:
        gridpair.launch._launch_resolved = real_launch
    assert direct == ["fwd", "bwd", "bwd2"]  # the ops' chain never takes the eager launch
    bound = 2e-2 if precision == "bf16-amp" else 1e-5
    for name in eager:
        difference = (eager[name].double() - through[name].double()).norm()
        assert difference <= bound * through[name].double().norm(), name


def test_a_repeated_eager_launch_reuses_the_kernel_the_jit_found(monkeypatch):
    """The eager path's first launch of a key goes through Triton's JIT; a repeat launches the
    very kernel object in the JIT's cache without calling the JIT, and computes bitwise what a
    JIT launch computes (same binary, same inputs). Another key goes through the JIT again."""
    from gridpair import launch as launching
    from gridpair.kernels import KERNELS

    kernel = KERNELS["fwd"]
    runs = []
    jit_run = type(kernel).run

    def counted_run(self, *args, **kwargs):
        runs.append(self.__name__)
        return jit_run(self, *args, **kwargs)

    monkeypatch.setattr(type(kernel), "run", counted_run)
    monkeypatch.setattr(launching, "_RESOLVED", {})
    selector = LaunchSelector()
    ops = draw(300, 49, 2, 3, 96, 584, seed=4, device="cuda").to(torch.bfloat16)
    projectors = (ops.to_grid, ops.from_grid)
    shifted = torch.empty(ops.left.numel() + 1, dtype=ops.left.dtype, device="cuda")[1:]
    shifted = shifted.view(ops.left.shape).copy_(ops.left)  # 2 bytes into its storage
    for operands in ([ops.left, ops.right], [shifted, ops.right]):  # aligned, then not
        key, tile = selector.choose_keyed("fwd", operands, projectors, 3)
        before = len(runs)
        first = launching.launch("fwd", operands, *projectors, 3, tile, direct=True, key=key)
        again = launching.launch("fwd", operands, *projectors, 3, tile, direct=True, key=key)
        assert len(runs) == before + 1, runs
        through_jit = launching.launch("fwd", operands, *projectors, 3, tile, direct=True)
        assert len(runs) == before + 2, runs
        torch.cuda.synchronize()
        # Bitwise holds on any GPU: one binary, the same inputs and launch grid, and the kernel
        # has no atomics (each program sums in a fixed order). A different kernel would not.
        assert torch.equal(again[0], through_jit[0]) and torch.equal(first[0], through_jit[0])
        (resolved,) = [v for k, v in launching._RESOLVED.items() if k[0] == key]
        cached = kernel.device_caches[torch.cuda.current_device()][0].values()
        assert any(entry is resolved for entry in cached)
    assert len(launching._RESOLVED) == 2


CAP = 101376  # a 99 KiB device's per-block shared memory


def _production_bwd2(dtype=torch.float32):
    ops = draw(300, 49, 2, 3, 96, 584, seed=8, device="cuda").to(dtype)
    operands = [ops.cotangent, ops.left, ops.right, ops.grad_grad_left, ops.grad_grad_right]
    return operands, [ops.to_grid.contiguous(), ops.from_grid.contiguous()]


def _loads_on_the_device(operands, projectors, tile):
    """Compile and load ``tile``'s bwd2 for the device with no limit of gridpair's own: any
    OutOfResources comes from Triton (its handle loading, which a cap lowers)."""
    import dataclasses

    from gridpair import devices, signature, validation
    from gridpair.geometry import Geometry

    limits = dataclasses.replace(devices.limits_for(operands[0].device), shared=2**31)
    geometry = Geometry.of(operands[0], projectors[0], 3)
    return validation.compile_on_device("bwd2", geometry, tile,
                                        signature.signature_of(operands, geometry), limits)


@pytest.mark.cold_compile  # the cap lives and dies with the child
def test_real_handles_enforce_an_emulated_limit(monkeypatch):
    """Under a Triton-level cap (pytest-coldcompile's smem_cap, what --smem-limit installs)
    the production fp32 second backward's first candidate is refused by Triton itself, with
    OutOfResources, and the selector admits a later one that loads under the cap."""
    from triton.runtime.errors import OutOfResources

    from pytest_coldcompile.devices import smem_cap

    operands, projectors = _production_bwd2()
    finder = LaunchSelector()
    key = finder.key("bwd2", operands, projectors, 3,
                     gridpair.devices.limits_for(operands[0].device))
    first = finder.candidates(key, torch.cuda.get_device_name())[0]
    # Capped first: a kernel Triton has loaded once is never checked again.
    cap = smem_cap.install(CAP)
    try:
        with pytest.raises(OutOfResources):
            _loads_on_the_device(operands, projectors, first)
        selector = LaunchSelector()
        events = []
        selector.subscribe(events.append)
        tile = selector.choose("bwd2", operands, projectors, 3)
        print("\n".join(f"{e.kind} {e.config} {e.resources} {e.outcome}" for e in events))
        probes = [e for e in events if e.kind == "probe"]
        assert probes[0].config == first.as_dict() and probes[0].outcome == "out_of_resources"
        assert tile is not None and tile != first
        assert _loads_on_the_device(operands, projectors, tile).shared <= CAP
    finally:
        cap.remove()
    # Uncapped, Triton loads the refused candidate: the cap, and only it, refused it.
    assert _loads_on_the_device(operands, projectors, first).shared > CAP


@pytest.mark.cold_compile  # the cap lives and dies with the child
def test_compiled_force_step_runs_validated_kernels(triton_compiles):
    """Under torch.compile and a Triton-level cap that refuses the production tiles (the
    test above), the compiled step runs and matches eager: Triton would refuse to load any
    kernel over the cap, so every kernel the step launched is one the selector validated."""
    from pytest_coldcompile.devices import smem_cap

    events = []
    unsubscribe = gridpair.SELECTOR.subscribe(events.append)
    cap = smem_cap.install(CAP)
    try:
        _compiled_force_step(triton_compiles)
    finally:
        cap.remove()
        unsubscribe()
    # The cap was binding: some candidate was refused, and fused launches were admitted.
    assert any(e.outcome == "out_of_resources" for e in events if e.kind == "probe"), events
    assert {e.op for e in events if e.kind == "admit"} >= {"fwd", "bwd2"}, events


@pytest.mark.cold_compile  # a process that compiled nothing: every compile shows
@pytest.mark.parametrize("precision", ["float32", "bf16-amp"])
def test_inductor_compiles_the_specialization_that_was_validated(monkeypatch, triton_compiles,
                                                                  precision):
    """Inductor compiles a user kernel with its own specialization of the integer arguments
    (a value 1 as a constant, divisibility by 16), whatever the JIT would do. Every
    specialization of our kernels that the compiled force step compiles (row count, strides,
    pointers, constants, warps, stages) is one that selection compiled and validated; under
    autocast too, where the traced ops cast float32 coefficients before the launch and the
    kernels store float32 gradients."""
    import threading

    from gridpair import validation

    validating = threading.local()
    validate = validation.compile_on_device

    def compile_on_device(*args, **kwargs):
        validating.active = True
        try:
            return validate(*args, **kwargs)
        finally:
            validating.active = False

    monkeypatch.setattr(validation, "compile_on_device", compile_on_device)
    seen = {"validation": set(), "other": []}

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        triton_compiles(src=src, metadata=metadata, metadata_group=metadata_group, times=times,
                        cache_hit=cache_hit)
        if not metadata["name"].startswith("_grid_pair"):
            return
        specialization = (
            metadata["name"], metadata["num_warps"], metadata["num_stages"], metadata["shared"],
            tuple(sorted(src.signature.items())),
            tuple(sorted((path, repr(value)) for path, value in src.constants.items())),
            tuple(sorted((path, repr(attrs)) for path, attrs in src.attrs.items() if attrs)))
        if getattr(validating, "active", False):
            seen["validation"].add(specialization)
        else:
            seen["other"].append((specialization, cache_hit))

    monkeypatch.setattr(knobs.compilation, "listener", listener)
    _compiled_force_step(triton_compiles, precision)
    assert seen["validation"]
    assert seen["other"], "the compiled step compiled none of our kernels"
    for specialization, _ in seen["other"]:
        assert specialization in seen["validation"], specialization
    print("compiled by Inductor:", [(s[0], hit) for s, hit in seen["other"]])


def _compiled_force_step(triton_compiles, precision="float32"):
    from torch.fx.experimental.proxy_tensor import make_fx

    gridpair.SELECTOR.reset()
    ops = draw(64, 49, 2, 3, 96, 584, seed=9, device="cuda").to(torch.float32)
    amp = _autocast(force_step) if precision == "bf16-amp" else force_step

    def step(left, right, to_grid, from_grid):
        return amp(left, right, to_grid, from_grid)

    graph = make_fx(step, tracing_mode="symbolic")(ops.left, ops.right, ops.to_grid,
                                                   ops.from_grid)
    compiled = torch.compile(graph, dynamic=True)
    # Against the eager step: the same kernels (bf16-amp: eager rounds the operands as the
    # kernels load them, traced they are cast first; the same dot inputs either way).
    bound = 2e-2 if precision == "bf16-amp" else 1e-4
    for nodes in (64, 100, 300):
        x = draw(nodes, 49, 2, 3, 96, 584, seed=nodes, layout="degree_major",
                 device="cuda").to(torch.float32)
        got = compiled(x.left, x.right, x.to_grid, x.from_grid)
        want = amp(x.left, x.right, x.to_grid, x.from_grid)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype
            if precision == "float32":
                torch.testing.assert_close(g, w, rtol=bound, atol=bound)
            else:
                assert (g.double() - w.double()).norm() <= bound * w.double().norm()
    ours = [(n, s) for n, s in triton_compiles.compiled + triton_compiles.hits
            if n.startswith("_grid_pair")]
    print("gridpair kernels compiled:", triton_compiles.compiled, "hits:", triton_compiles.hits)
    assert {n for n, _ in ours} >= {"_grid_pair_fwd_kernel", "_grid_pair_bwd2_kernel"}


@pytest.mark.parametrize("op", ["grid_pair_fwd", "grid_pair_bwd", "grid_pair_bwd2"])
def test_cuda_autocast_rounds_float32_and_leaves_float64(op):
    """Under autocast float32 operands are computed in bfloat16 (rounded as the kernels load
    them): the forward's output comes in bfloat16, each gradient in its float32 operand's
    dtype. float64 is left alone, as torch leaves it."""
    ops = draw(5, 9, 2, 3, 16, 23, seed=13, device="cuda")
    single, half, double = torch.float32, torch.bfloat16, torch.float64
    float32_results = {"grid_pair_fwd": [half], "grid_pair_bwd": [single] * 2,
                       "grid_pair_bwd2": [single] * 3}[op]
    for dtype, computed_in, result_dtypes in ((single, half, float32_results),
                                              (double, double, [double] * 3)):
        args = _op_args(op, ops.to(dtype))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            got = getattr(torch.ops.gridpair, op)(*args)
        cast = [a.to(computed_in) if isinstance(a, torch.Tensor) else a for a in args]
        want = getattr(gridpair.reference, op.removeprefix("grid_pair_"))(*cast)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w, want_dtype in zip(got, want, result_dtypes[:len(got)], strict=True):
            assert g.dtype == want_dtype
            torch.testing.assert_close(g.double(), w.double(), rtol=2e-2, atol=2e-2)


def _op_args(op, ops):
    proj = (ops.to_grid, ops.from_grid, ops.n_frames)
    names = {"grid_pair_fwd": ("left", "right"),
             "grid_pair_bwd": ("cotangent", "left", "right"),
             "grid_pair_bwd2": ("cotangent", "left", "right", "grad_grad_left",
                                "grad_grad_right")}[op]
    return (*(getattr(ops, n) for n in names), *proj)




@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_offsets_past_2_31_of_a_few_nodes_of_a_huge_degree_major_storage(dtype):
    """A few nodes of (D, N, F, K*C) storage with N*F*K*C*(D-1) > 2^31: every stride and the
    row count fit 32 bits, the slot offset (D-1) * stride_d does not (4.6 GB of storage an
    operand in bf16, 9.2 GB in fp32)."""
    if torch.cuda.get_device_properties(0).total_memory < 40 * 2**30:
        pytest.skip("needs 40 GiB of GPU memory")
    degrees, focus, frames, channels, grid, base_nodes = 49, 2, 3, 96, 584, 80_000
    gen = torch.Generator(device="cuda").manual_seed(14)

    def operand():
        base = torch.empty(degrees, base_nodes, focus, frames * channels, dtype=dtype,
                           device="cuda")
        view = base.transpose(0, 1)[-5:]  # the last nodes: the largest offsets
        view.copy_(torch.randn(view.shape, generator=gen, device="cuda", dtype=dtype))
        return view

    left, right = operand(), operand()
    reach = sum((n - 1) * s for n, s in zip(left.shape, left.stride())) + left.storage_offset()
    assert reach > 2**31 and max(left.stride()) < 2**31
    scale = (degrees * frames) ** -0.5
    to_grid, from_grid = (torch.randn(grid, degrees * frames, generator=gen, device="cuda",
                                      dtype=dtype) * scale for _ in range(2))
    selector = LaunchSelector()
    events = []
    selector.subscribe(events.append)
    with using_selector(selector):
        got = grid_pair(left, right, to_grid, from_grid, frames)
    assert [e.kind for e in events if e.kind == "admit"], events  # the fused kernel ran
    args = [x.contiguous().double() for x in (left, right, to_grid, from_grid)]
    exact = reference_grid_pair(*args, frames)
    own = reference_grid_pair(*(x.to(dtype) for x in args), frames)
    floor = 4 * torch.finfo(dtype).eps
    assert relative_error(got, exact) <= 5 * max(relative_error(own, exact), floor)


@pytest.mark.parametrize("aligned", [True, False])
def test_a_profile_compile_is_the_specialization_the_jit_launches(aligned):
    """A profile compile for this GPU's architecture gives the TTIR the kernel's JIT gives on
    the GPU for the same placeholders: same types, constants and pointer attributes."""
    import triton
    from triton.backends.compiler import GPUTarget

    from gridpair.geometry import Geometry, Tile, kernel_constexprs
    from gridpair.kernels import KERNELS
    from gridpair.signature import Signature
    from gridpair.validation import _ast_source, _placeholder_arguments

    major, minor = torch.cuda.get_device_capability()
    geometry, tile = Geometry(49, 2, 3, 96, 584), Tile(32, 32, 2, 4)
    # Every class of launch scalar: the row count a multiple of 16, grad_out's strides those
    # of a contiguous operand (its channel stride 1), left's odd, right's 64-bit.
    scalars = ("i32:16", "i32:16", "i32:16", "i32:16", "1", "i32", "i32", "i32", "i32",
               "i64:16", "i64", "i32:16", "1")
    signature = Signature(torch.bfloat16, (aligned, True, True), False, scalars)
    launched = KERNELS["bwd"].warmup(
        *_placeholder_arguments("bwd", signature), grid=(1,),
        **kernel_constexprs(geometry, tile, torch.bfloat16, False),
        num_warps=tile.num_warps, num_stages=tile.num_stages)
    profiled = triton.compile(_ast_source("bwd", geometry, tile, signature, 10 * major + minor),
                              target=GPUTarget("cuda", 10 * major + minor, 32),
                              options={"num_warps": tile.num_warps,
                                       "num_stages": tile.num_stages})
    assert "tt.divisibility" in profiled.asm["ttir"]
    assert profiled.asm["ttir"] == launched.asm["ttir"]
