"""The benchmark tools on the CPU: the benchmark's records and the sweep's tuned-tiles file.
Their figures come from a GPU (docs/evidence/); here they must run and say what they measured."""

import json

import torch
from interpreted_kernels import interpreted_kernels

from benchmarks import bench_gridpair
from benchmarks.sweep_tiles import ERROR_BOUND, tuned_entries
from gridpair import tuned
from gridpair.active import using_selector
from gridpair.geometry import Geometry, Tile
from gridpair.selector import LaunchSelector
from gridpair.validation import Compiled

RECORD_KEYS = {"shape", "dtype", "pass", "impl", "ms", "peak_mib", "flops", "tflops"}
# P25 at 3 nodes: G=296, D=25, K=1, C=64, F=1; 2*G*D*K*C*N*F flops per grid-pair product, and
# the benchmark's documented product counts per pass (3 in a forward, 16 in a force step).
P25_PRODUCT_FLOPS = 2 * 296 * 25 * 1 * 64 * 3 * 1
PRODUCTS = {"fwd": 3, "force": 16}


def test_bench_writes_one_record_per_shape_dtype_pass_and_impl(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_gridpair.main(["--device", "cpu", "--shapes", "P25", "--nodes", "3",
                                "--dtypes", "float32,bf16-amp", "--passes", "fwd,force",
                                "--impls", "fused,reference-eager", "--out", str(out)]) == 0
    records = json.loads(out.read_text())
    assert len(records) == 2 * 2 * 2
    assert {(r["dtype"], r["pass"], r["impl"]) for r in records} == {
        (d, p, i) for d in ("float32", "bf16-amp") for p in ("fwd", "force")
        for i in ("fused", "reference-eager")}
    for record in records:
        assert RECORD_KEYS <= set(record), record
        assert record["shape"] == "P25-C64-F1-K1-G296-N3"
        assert record["ms"] > 0
        assert record["flops"] == PRODUCTS[record["pass"]] * P25_PRODUCT_FLOPS
        # Whatever the machine's speed: the throughput is the work over the time.
        expected = record["flops"] / (record["ms"] * 1e-3) / 1e12
        assert record["tflops"] > 0
        assert abs(record["tflops"] - expected) <= 1e-9 * expected, record
    assert "P25-C64-F1-K1-G296-N3" in capsys.readouterr().out  # the printed table


class _OneTile(LaunchSelector):
    """Admits one small tile without compiling it (validation is tested in tests/gridpair)."""

    def candidates(self, key, device_name):
        return [Tile(16, 16, 1, 4)]

    def validate(self, key, tile, limits):
        return Compiled(0, None)


def test_bench_fused_passes_run_the_kernels_and_agree_with_the_reference(monkeypatch):
    """The benchmark's fused passes launch gridpair's kernels - here under Triton's interpreter,
    on the CPU - and compute what its reference passes compute, within float32 error."""
    from gridpair import launch as launch_module

    launched = []
    real_launch = launch_module.DirectLaunch.__call__

    def counting(self, *args, **kwargs):
        launched.append(self.op)
        return real_launch(self, *args, **kwargs)

    monkeypatch.setattr(launch_module.DirectLaunch, "__call__", counting)
    monkeypatch.setenv("GRIDPAIR_DEVICE", "h200")
    data = bench_gridpair.inputs("P25", 2, "cpu")
    with using_selector(_OneTile()), interpreted_kernels():
        for kind in bench_gridpair.PASSES:
            launched.clear()
            fused = bench_gridpair.make_pass(kind, bench_gridpair.grid_pair, 1)(*data)
            fused = fused if isinstance(fused, tuple) else (fused,)
            assert set(launched) == {"fwd": {"fwd"}, "fwd+bwd": {"fwd", "bwd"},
                                     "force": {"fwd", "bwd"}}[kind], kind
            exact = bench_gridpair.make_pass(kind, bench_gridpair.reference_grid_pair, 1)(
                *(x.double() for x in data))
            exact = exact if isinstance(exact, tuple) else (exact,)
            assert len(fused) == len(exact) == {"fwd": 1, "fwd+bwd": 3, "force": 6}[kind]
            for got, want in zip(fused, exact):
                scale = want.abs().max().item()
                torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5 * scale)


def _row(tile, ms, error, reference_error=1e-3, op="fwd"):
    return {"shape": "P147", "dtype": "bf16", "op": op, "tile": tile.as_dict(), "ms": ms,
            "error_vs_f64": error, "reference_error": reference_error}


def test_sweep_keeps_the_fastest_tiles_within_the_numerics_bound(tmp_path, monkeypatch):
    fast_but_wrong, fast, slow, slowest = (Tile(128, 64, 3, 8), Tile(64, 32, 2, 4),
                                           Tile(32, 32, 2, 4), Tile(16, 16, 1, 4))
    rows = [_row(slow, 0.3, 1e-3), _row(fast_but_wrong, 0.1, 1.01 * ERROR_BOUND * 1e-3),
            _row(slowest, 0.9, 1e-3), _row(fast, 0.2, 2e-3),
            {**_row(Tile(64, 64, 4, 4), None, None), "error": "over the limit"}]
    del rows[-1]["ms"], rows[-1]["error_vs_f64"]
    entries = tuned_entries(rows, "NVIDIA H200")
    assert [entry["tiles"] for entry in entries] == [[fast.as_dict(), slow.as_dict()]]
    path = tmp_path / "tiles.json"
    path.write_text(json.dumps(entries))
    monkeypatch.setenv(tuned.TUNED_TILES_ENV, str(path))
    geometry = Geometry(49, 2, 3, 96, 584)
    assert tuned.lookup("NVIDIA H200", "fwd", torch.bfloat16, geometry)[:2] == (fast, slow)
