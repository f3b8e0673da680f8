"""The isolation benchmark's kinds are what their names say: the heavy-collection-cuda module
collects 5,000 items and its conftest asks Triton's driver for the target at collection; on a
machine without CUDA the CUDA kinds are skipped with a note (the benchmark runs them on a GPU)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_isolation.py"


@pytest.fixture(scope="module")
def bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_isolation", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_heavy_kind_collects_5000_items_and_runs_those_asked(
    bench: Any, pytester: pytest.Pytester
) -> None:
    bench.write_kind(pytester.path, "heavy-collection-cuda", 30)
    (pytester.path / "conftest.py").rename(pytester.path / "heavy_conftest.py")
    pytester.makeini("[pytest]\nmarkers =\n    bench_run: selected\n")
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-m", "bench_run")
    result.stdout.fnmatch_lines(["30/5000 tests collected (4970 deselected)*"])


def test_the_heavy_conftest_asks_the_driver_for_the_target(
    bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Triton's driver does on a GPU: current_device() and get_device_capability()."""
    bench.write_kind(tmp_path, "heavy-collection-cuda", 30)
    asked = []
    active = types.SimpleNamespace(get_current_target=lambda: asked.append(1) or "target")
    runtime = types.ModuleType("triton.runtime")
    runtime.driver = types.SimpleNamespace(active=active)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "triton.runtime", runtime)
    namespace: dict[str, Any] = {}
    exec(compile((tmp_path / "conftest.py").read_text(), "conftest.py", "exec"), namespace)
    assert asked == [1] and namespace["TARGET"] == "target"


def test_without_cuda_the_cuda_kinds_are_skipped_with_a_note(
    bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "_cuda_present", lambda: False)
    counts = {"tests": 1, "spawn": 1, "pure": 1, "heavy": 30}
    records, notes = bench.measure(counts, 1, ["plain"], ["heavy-collection-cuda", "cuda"])
    assert records == []
    assert notes == ["no CUDA device: the kinds heavy-collection-cuda, cuda were skipped"]
