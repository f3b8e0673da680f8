"""Parallel validation on the CPU with device profiles: the parallel search decides, reports and
caches exactly what the serial one does, compiles each probed candidate once, validates the
sibling ops ahead without reporting it, forgets that work on reset, survives fork and exit; and
``using_selector`` is scoped to its own thread."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from triton.compiler.errors import CompilationError

from gridpair import ladder as ladder_module
from gridpair import validation as validation_module
from gridpair.active import SELECTOR, active_selector, using_selector
from gridpair.geometry import Tile
from gridpair.pool import WORKERS_ENV
from gridpair.selector import LaunchSelector

P147 = dict(degrees=49, focus=2, frames=3, channels=96, grid=584)
# Where nothing fits, every candidate of the ladder is refused whatever the geometry: a small
# one compiles each refusal in a fraction of P147's time.
SMALL = dict(degrees=16, focus=2, frames=1, channels=16, grid=32)
# Where rejections before an admission are the point, not P147: under a 36000-byte cap the fp32
# bwd2 ladder refuses its head (38912 bytes) and admits the next (34816).
MEDIUM = dict(degrees=16, focus=2, frames=3, channels=32, grid=152)
SMALL_DEVICE = "rtx-pro-6000-blackwell"
OPERAND_COUNT = {"fwd": 2, "bwd": 3, "bwd2": 5}
ROOT = Path(__file__).resolve().parents[2]


def launch_args(op, dtype=torch.bfloat16, nodes=2, geometry=P147):
    d, f, k, c, g = (geometry[n] for n in ("degrees", "focus", "frames", "channels", "grid"))
    coefficient = torch.zeros(nodes, d, f, k * c, dtype=dtype)
    projector = torch.zeros(g, d * k, dtype=dtype)
    return [coefficient] * OPERAND_COUNT[op], (projector, projector), k


def protocol(events):
    """Everything an event says but the wall time (which differs between any two runs)."""
    return [(e.kind, e.op, dict(e.config), dict(e.resources), e.outcome, e.selector, e.device)
            for e in events]


@pytest.fixture
def profile(monkeypatch):
    def use(name, cap=None):
        monkeypatch.setenv("GRIDPAIR_DEVICE", name)
        if cap is None:
            monkeypatch.delenv("PYTEST_COLDCOMPILE_SMEM_LIMIT", raising=False)
        else:
            monkeypatch.setenv("PYTEST_COLDCOMPILE_SMEM_LIMIT", str(cap))
    return use


@pytest.fixture
def compiled(monkeypatch):
    """Every call of the selector's compile function, as (op, tile), from any thread."""
    calls = []
    lock = threading.Lock()
    real = validation_module.compile_candidate

    def counting(op, geometry, tile, signature, limits):
        with lock:
            calls.append((op, tile))
        return real(op, geometry, tile, signature, limits)

    monkeypatch.setattr(validation_module, "compile_candidate", counting)
    return calls


def tiles(events, kind="probe"):
    return [Tile(**e.config) for e in events if e.kind == kind]


@pytest.mark.parametrize(("device", "cap", "op", "dtype", "geometry", "fits"), [
    (SMALL_DEVICE, 36000, "bwd2", torch.float32, MEDIUM, True),  # a rejection, an admission
    ("h200", None, "fwd", torch.bfloat16, P147, True),  # the first candidate fits
    (SMALL_DEVICE, 1024, "fwd", torch.bfloat16, SMALL, False),  # nothing fits: fallback
])
def test_the_parallel_search_decides_reports_and_caches_as_the_serial_one(
        profile, compiled, device, cap, op, dtype, geometry, fits):
    profile(device, cap)
    serial, parallel = LaunchSelector(workers=1), LaunchSelector(workers=3)
    outcomes = {}
    for name, selector in (("serial", serial), ("parallel", parallel)):
        events = []
        selector.subscribe(events.append)
        compiled.clear()
        tile = selector.choose(op, *launch_args(op, dtype, geometry=geometry))
        assert selector.idle(timeout=300)
        again = selector.choose(op, *launch_args(op, dtype, nodes=5, geometry=geometry))
        outcomes[name] = (tile, again, events, list(compiled), list(selector.cached()))
    s_tile, s_again, s_events, s_compiled, s_cached = outcomes["serial"]
    p_tile, p_again, p_events, p_compiled, p_cached = outcomes["parallel"]
    assert (s_tile is not None) == fits
    assert p_tile == s_tile == p_again == s_again
    assert protocol(p_events) == protocol(s_events)
    assert p_cached == s_cached  # the same Decision: key, every probe, the admitted one
    probed = tiles(p_events)
    # One compile per probed candidate, in both; the parallel one compiled at most two more
    # ahead of the last probe, and never one twice (its sibling ops' compiles aside).
    assert s_compiled == [(op, t) for t in probed]
    p_compiled = [c for c in p_compiled if c[0] == op]
    assert len(set(p_compiled)) == len(p_compiled)
    assert set(s_compiled) <= set(p_compiled)
    assert len(p_compiled) <= len(s_compiled) + 2


def test_every_decision_carries_the_seconds_waited_and_every_probe_its_compile_time(profile):
    profile(SMALL_DEVICE, 36000)  # a rejection, then an admission
    selector = LaunchSelector(workers=1)
    events = []
    selector.subscribe(events.append)
    selector.choose("bwd2", *launch_args("bwd2", torch.float32, geometry=MEDIUM))
    selector.choose("bwd2", *launch_args("bwd2", torch.float32, geometry=MEDIUM))
    probes = [e for e in events if e.kind == "probe"]
    admit, cached = [e for e in events if e.kind == "admit"]
    assert len(probes) > 1
    assert all(isinstance(p.seconds, float) and p.seconds > 0 for p in probes)
    # Serially the caller waited for every compile of its search.
    assert admit.seconds >= sum(p.seconds for p in probes)
    assert cached.outcome == "cached"
    assert isinstance(cached.seconds, float) and 0 <= cached.seconds < admit.seconds


def test_sibling_ops_are_validated_ahead_unreported_and_never_compiled_twice(profile, compiled):
    profile(SMALL_DEVICE)
    selector, reference = LaunchSelector(workers=2), LaunchSelector(workers=1)
    events = []
    selector.subscribe(events.append)
    selector.choose("fwd", *launch_args("fwd", geometry=SMALL))
    assert selector.idle(timeout=600)
    # Only the forward was asked for: the backwards' compiles are no events.
    assert {e.op for e in events} == {"fwd"}
    assert {op for op, _ in compiled} == {"fwd", "bwd", "bwd2"}
    for op in ("bwd", "bwd2"):
        ahead = [t for o, t in compiled if o == op]
        assert ahead and len(set(ahead)) == len(ahead)
        events.clear()
        before = len(compiled)
        selector.choose(op, *launch_args(op, geometry=SMALL))
        assert compiled[before:] == []  # every verdict was ready
        expected = []
        reference.subscribe(expected.append)
        reference.choose(op, *launch_args(op, geometry=SMALL))
        assert protocol(events) == protocol(expected)  # a normal search, in ladder order
        assert set(tiles(events)) <= set(ahead)


@pytest.mark.parametrize("traced", [False, True], ids=["real", "traced"])
def test_autocast_siblings_are_the_mixed_precision_keys_the_backwards_ask(profile, compiled,
                                                                          traced):
    """Under autocast the forward gets float32 coefficients with bfloat16 projectors; the
    backwards then get a bfloat16 cotangent with float32 coefficients and grad-grads. Those are
    the sibling keys validated ahead, for real tensors (rounded as they are loaded) and traced
    ones (cast first): asked for, they compile nothing more."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    profile(SMALL_DEVICE)
    selector = LaunchSelector(workers=2)
    mode = FakeTensorMode() if traced else None

    def tensor(*shape, dtype=torch.float32):
        value = torch.zeros(*shape, dtype=dtype)
        return mode.from_tensor(value) if mode is not None else value

    single = tensor(2, 16, 1, 16)
    half = tensor(2, 16, 1, 16, dtype=torch.bfloat16)
    projectors = (tensor(32, 16, dtype=torch.bfloat16),) * 2
    selector.choose("fwd", [single, single], projectors, 1)
    assert selector.idle(timeout=600)
    assert {op for op, _ in compiled} == {"fwd", "bwd", "bwd2"}
    before = len(compiled)
    assert selector.choose("bwd", [half, single, single], projectors, 1) is not None
    assert selector.choose("bwd2", [half, single, single, single, single], projectors,
                           1) is not None
    assert compiled[before:] == []
    # All-bfloat16 operands are another specialization: not validated ahead, compiled now.
    selector.choose("bwd", [half, half, half], projectors, 1)
    assert "bwd" in {op for op, _ in compiled[before:]}
    assert selector.idle(timeout=600)


@pytest.mark.parametrize(("workers", "early"), [(2, False), (3, True)])
def test_siblings_start_beside_the_search_only_with_a_core_to_spare(profile, monkeypatch,
                                                                    workers, early):
    """With three workers and more, the backwards' first candidates compile while the
    forward's search still runs; with two, only after it is decided."""
    profile(SMALL_DEVICE)
    sibling_started, forward_compiled = threading.Event(), threading.Event()
    forward_pending_at_sibling_start = []
    real = validation_module.compile_candidate

    def observed(op, geometry, tile, signature, limits):
        if op == "fwd":
            sibling_started.wait(timeout=3)  # time for a sibling to start beside it
            result = real(op, geometry, tile, signature, limits)
            forward_compiled.set()
            return result
        if not sibling_started.is_set():
            forward_pending_at_sibling_start.append(not forward_compiled.is_set())
            sibling_started.set()
        return real(op, geometry, tile, signature, limits)

    monkeypatch.setattr(validation_module, "compile_candidate", observed)
    selector = LaunchSelector(workers=workers)
    selector.choose("fwd", *launch_args("fwd", geometry=SMALL))
    assert selector.idle(timeout=600)
    assert forward_pending_at_sibling_start == [early]


def test_reset_forgets_the_work_validated_ahead(profile, compiled):
    profile(SMALL_DEVICE)
    selector = LaunchSelector(workers=2)
    selector.choose("fwd", *launch_args("fwd", geometry=SMALL))
    selector.reset()
    assert selector.idle(timeout=600)
    assert list(selector.cached()) == []
    events = []
    selector.subscribe(events.append)
    compiled.clear()
    selector.choose("bwd", *launch_args("bwd", geometry=SMALL))
    # Nothing from before the reset answered: each probed candidate compiled again now.
    assert [t for _, t in compiled if _ == "bwd"][:len(tiles(events))] == tiles(events)


GOOD, TOO_BIG, BAD = Tile(16, 16, 2, 4), Tile(64, 64, 3, 8), Tile(24, 16, 2, 4)  # 24: no arange


@pytest.mark.parametrize(("ladder", "raises"), [
    ((TOO_BIG, BAD, GOOD), True),  # the error comes first in ladder order: it propagates
    ((GOOD, BAD), False),  # compiled ahead of the admitted tile only: never seen
])
def test_a_compile_error_follows_serial_semantics(profile, compiled, monkeypatch, ladder,
                                                  raises):
    profile(SMALL_DEVICE)
    monkeypatch.setattr(ladder_module, "generated_candidates", lambda *args: list(ladder))
    selector = LaunchSelector(workers=3)
    for attempt in (1, 2):
        if raises:
            with pytest.raises(CompilationError):
                selector.choose("fwd", *launch_args("fwd"))
            assert list(selector.cached()) == []
            # Not cached: each attempt compiles the failing candidate again (the sibling ops'
            # ladders, compiled beside it, are their own searches).
            assert [t for op, t in compiled if op == "fwd"].count(BAD) == attempt
        else:
            assert selector.choose("fwd", *launch_args("fwd")) == GOOD
    assert selector.idle(timeout=300)


def test_using_selector_is_scoped_to_its_thread():
    mine = LaunchSelector()
    inside, seen = threading.Event(), []
    done = threading.Event()

    def hold():
        with using_selector(mine):
            seen.append(("holder", active_selector()))
            inside.set()
            done.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(30)
    seen.append(("other", active_selector()))
    done.set()
    holder.join(30)
    assert seen == [("holder", mine), ("other", SELECTOR)]
    assert active_selector() is SELECTOR


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_while_validating_ahead_leaves_both_processes_working(profile):
    profile(SMALL_DEVICE)
    selector = LaunchSelector(workers=2)
    # Made before the fork: torch's OpenMP pool does not survive one (a fill would hang).
    backward = launch_args("bwd")
    selector.choose("fwd", *launch_args("fwd"))  # the backwards now compile ahead
    pid = os.fork()
    if pid == 0:  # the child: no worker came along; searching starts its own
        code = 1
        try:
            code = 0 if selector.choose("bwd", *backward) is not None else 2
            selector.idle(timeout=300)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert selector.choose("bwd", *backward) is not None
    assert selector.idle(timeout=300)


def test_exit_while_compiling_ahead_is_clean(tmp_path):
    script = ("from tests.gridpair.test_parallel_selection import launch_args\n"
              "from gridpair.selector import LaunchSelector\n"
              "LaunchSelector(workers=2).choose('fwd', *launch_args('fwd'))\n"
              "import time; time.sleep(1)\n")  # the backwards' compiles are inside LLVM now
    env = {**os.environ, "GRIDPAIR_DEVICE": SMALL_DEVICE, "PYTHONPATH": str(ROOT),
           "TRITON_CACHE_DIR": str(tmp_path / "triton")}  # cold: the backwards are compiling
    env.pop("PYTEST_COLDCOMPILE_SMEM_LIMIT", None)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "FATAL" not in run.stderr


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_bad_worker_counts_are_named(workers, monkeypatch):
    with pytest.raises(ValueError, match="workers: expected a positive thread count"):
        LaunchSelector(workers=workers)
    monkeypatch.setenv(WORKERS_ENV, "many")
    with pytest.raises(ValueError, match=f"{WORKERS_ENV}: expected a positive thread count"):
        _ = LaunchSelector(workers=None).workers
