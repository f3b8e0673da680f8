"""Cold children are pristine: no state from earlier tests, private caches, resets, modes."""

from __future__ import annotations

import os
import sys
from xml.etree import ElementTree

import pytest
from coldhelp import LIGHT_PRELOAD, conftest, needs_fork, run

pytestmark = needs_fork

# Every way a cold child can start; each must give the same isolation.
MODES = ["fork", "zygote", "spawn"]

WARM_THEN_COLD = """
import pytest, torch

STATE = []

def cheap_backend(gm, example_inputs):
    return gm.forward

def f(x):
    return x + 1

def cache_entries():
    return len(torch._C._dynamo.eval_frame._debug_get_cache_entry_list(f.__code__))

def test_warm():
    STATE.append("warm")
    torch.compile(f, backend=cheap_backend)(torch.ones(2))
    assert cache_entries() == 1
    assert SELECTOR.cache == {"warm": 1, "collected": 1}

@pytest.mark.cold_compile
def test_cold():
    from torch._dynamo.utils import counters
    assert STATE == [], "a module global from the warm test"
    assert cache_entries() == 0, "Dynamo's compiled-frame cache of the warm test"
    assert counters["stats"]["unique_graphs"] == 0, "Dynamo's counters of the warm test"
    assert SELECTOR.cache == {}, "a selector cache filled before the test"
    assert SELECTOR.resets >= 1
"""

SELECTOR_CONFTEST = """
import pytest_coldcompile

class CachingSelector:
    name = "caching"
    def __init__(self):
        self.cache = {"collected": 1}  # filled at collection, before any fork
        self.resets = 0
    def reset(self):
        self.cache.clear()
        self.resets += 1
    def subscribe(self, listener):
        return lambda: None

import builtins
builtins.SELECTOR = pytest_coldcompile.register_selector(CachingSelector())
"""


def _warm_then_cold(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(conftest(SELECTOR_CONFTEST))
    pytester.makepyfile(
        test_warm_cold=WARM_THEN_COLD.replace(
            "def test_warm():", "def test_warm():\n    SELECTOR.cache['warm'] = 1"
        )
    )


def test_warm_in_process_state_does_not_reach_a_cold_test(pytester: pytest.Pytester) -> None:
    _warm_then_cold(pytester)
    result = run(pytester, "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*cold-compile: fork (auto: *forking is safe)*"])


# The zygote's child alone: a spawned child re-collects and is made cold by the same code
# (recollected.RecollectingChild), from a fresh interpreter that holds nothing of the
# parent's, where the
# zygote's was forked from a server that preloaded torch; what spawning itself does is
# test_spawn_mode_runs_the_test_in_a_fresh_interpreter's (and private caches' in each mode).
@pytest.mark.parametrize("mode", ["zygote"])
def test_warm_state_does_not_reach_a_re_collecting_child(
    pytester: pytest.Pytester, mode: str
) -> None:
    _warm_then_cold(pytester)
    result = run(pytester, "-v", f"--cold-compile-mode={mode}")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*cold-compile: {mode} ({mode}: chosen by *"])


def test_the_same_pair_in_process_does_see_the_warm_state(pytester: pytest.Pytester) -> None:
    # Control: without the plugin the cold test runs in the warm process and must fail,
    # or the test above could pass for the wrong reason.
    _warm_then_cold(pytester)
    result = run(pytester, "-p", "no:coldcompile", "-W", "ignore::pytest.PytestUnknownMarkWarning")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*a module global from the warm test*"])


@pytest.mark.parametrize("mode", MODES)
def test_cold_tests_do_not_see_each_other(cold: pytest.Pytester, mode: str) -> None:
    cold.makepyfile(
        """
        import os
        SEEN = []
        def test_one():
            SEEN.append(os.getpid())
        def test_two():
            assert SEEN == []
            SEEN.append(os.getpid())
        """
    )
    run(cold, "--cold-compile", f"--cold-compile-mode={mode}", *LIGHT_PRELOAD).assert_outcomes(
        passed=2)


SESSION_FIXTURES = """
import os, pytest

@pytest.fixture(scope="session")
def resource():
    with open("events.txt", "a") as f:
        f.write(f"setup {os.getpid()}\\n")
    yield
    with open("events.txt", "a") as f:
        f.write(f"teardown {os.getpid()}\\n")

def test_in_process(resource):
    with open("parent.txt", "w") as f:
        f.write(str(os.getpid()))

@pytest.mark.cold_compile
def test_cold_a(resource):
    pass

@pytest.mark.cold_compile
def test_cold_b(resource):
    pass
"""


@pytest.mark.parametrize("mode", MODES)
def test_session_fixtures_are_set_up_and_torn_down_in_each_child(
    cold: pytest.Pytester, mode: str
) -> None:
    cold.makepyfile(test_session=SESSION_FIXTURES)
    run(cold, f"--cold-compile-mode={mode}", *LIGHT_PRELOAD).assert_outcomes(passed=3)
    parent = (cold.path / "parent.txt").read_text()
    events = (cold.path / "events.txt").read_text().split()
    pairs = list(zip(events[::2], events[1::2], strict=True))
    assert pairs.count(("setup", parent)) == 1
    assert pairs.count(("teardown", parent)) == 1  # the parent's own copy, once
    children = {pid for what, pid in pairs if pid != parent}
    assert len(children) == 2
    for pid in children:
        assert pairs.count(("setup", pid)) == 1
        assert pairs.count(("teardown", pid)) == 1


@pytest.mark.parametrize("mode", MODES)
def test_private_caches_are_used_then_removed(cold: pytest.Pytester, mode: str) -> None:
    cold.makepyfile(
        """
        import os, pytest, torch, triton.knobs

        @pytest.mark.cold_compile
        def test_compile(cold_state, compile_counter):
            import torch._inductor.config as ic
            caches = cold_state.cache_dir
            with open("cache_dir.txt", "w") as f:
                f.write(caches)
            assert os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith(caches)
            assert os.environ["TRITON_CACHE_DIR"].startswith(caches)
            assert triton.knobs.cache.dir.startswith(caches)
            assert "TORCH_COMPILE_JOB_ID" not in os.environ
            assert ic.compile_threads == 1
            assert not ic.fx_graph_remote_cache
            assert not torch._dynamo.config.automatic_dynamic_local_pgo
            # One C++ kernel (the sum); the backward graph, an expand, compiles to none.
            g = torch.compile(lambda x: x.sum(), backend=compile_counter)
            g(torch.ones(3, requires_grad=True)).backward()
            compile_counter.assert_graphs(frames=1, forward=1, backward=1)
            assert os.listdir(os.path.join(caches, "inductor"))  # the compile wrote here
        """
    )
    home, tmp = cold.path / "home", cold.path / "tmp"
    home.mkdir()
    tmp.mkdir()
    cold._monkeypatch.setenv("HOME", str(home))
    cold._monkeypatch.setenv("TMPDIR", str(tmp))
    cold._monkeypatch.setenv("TORCH_COMPILE_JOB_ID", "shared-job")
    # No ISA probe .so per child (about 4 s): the kernel still compiles into the private cache.
    cold._monkeypatch.setenv("TORCHINDUCTOR_VEC_ISA_OK", "1")
    cold._monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    cold._monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    result = run(cold, "--cold-compile-report=report.json", f"--cold-compile-mode={mode}")
    result.assert_outcomes(passed=1)
    assert not os.path.exists((cold.path / "cache_dir.txt").read_text())
    assert not (home / ".triton").exists()
    assert [p.name for p in tmp.iterdir() if p.name.startswith("torchinductor")] == []
    # The same run feeds the summary and the JSON report with the compile's figures.
    result.stdout.fnmatch_lines(
        ["*test_private_caches_are_used_then_removed.py::test_compile *passed* 1 * 1 * 1 *"]
    )
    import json

    figures = json.loads((cold.path / "report.json").read_text())
    entry = figures["test_private_caches_are_used_then_removed.py::test_compile"]
    assert entry["frames"] == 1
    assert entry["forward_graphs"] == 1
    assert entry["backward_graphs"] == 1
    assert entry["compile_s"] > 0
    assert entry["outcome"] == "passed"
    assert entry["mode"] == mode
    assert entry["mode_reason"] == f"{mode}: chosen by --cold-compile-mode"


DYNAMO_IN_PARENT = """
import torch._dynamo  # binds Dynamo's package cache to this process's cache directory
"""


def test_dynamo_package_cache_is_private_when_pytest_imported_dynamo(
    cold: pytest.Pytester,
) -> None:
    """Importing Dynamo runs Inductor's cache_dir(), which creates the user's default cache
    directory and writes it into TORCHINDUCTOR_CACHE_DIR: a conftest that imports Dynamo does
    so in the pytest process, and forked children inherit that environment (zygote and spawned
    children start from a fresh one). A cold child still keeps Dynamo's on-disk packages in its
    private directory."""
    cold.makeconftest(DYNAMO_IN_PARENT)
    cold.makepyfile(
        """
        import os, pytest

        @pytest.mark.cold_compile
        def test_cold(cold_state):
            from torch._dynamo.package import DynamoCache
            path = DynamoCache.path_prefix()
            private = os.environ["TORCHINDUCTOR_CACHE_DIR"]
            assert private.startswith(cold_state.cache_dir)
            assert path == os.path.join(private, "dynamo"), path
        """
    )
    tmp = cold.path / "tmp"
    tmp.mkdir()
    cold._monkeypatch.setenv("TMPDIR", str(tmp))
    cold._monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    run(cold, "--cold-compile-mode=fork").assert_outcomes(passed=1)


def test_spawn_mode_runs_the_test_in_a_fresh_interpreter(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        import os, sys, pytest
        PARENT_MODULES = set(sys.modules)

        def test_in_process():
            with open("parent.txt", "w") as f:
                f.write(str(os.getpid()))

        @pytest.mark.cold_compile
        def test_spawned(cold_state, record_property):
            record_property("child_pid", os.getpid())
            assert cold_state.cold and cold_state.mode == "spawn"
            print("spawned child says hi")
            assert 1 + 1 == 3
        """
    )
    result = run(cold, "--cold-compile-mode=spawn", "--junitxml=junit.xml", "-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cold-compile: spawn (spawn: chosen by --cold-compile-mode)*",
            "*assert (1 + 1) == 3*",
            "*Captured stdout call*",
            "spawned child says hi",
        ]
    )
    cases = ElementTree.parse(cold.path / "junit.xml").getroot().iter("testcase")
    spawned = [c for c in cases if c.get("name") == "test_spawned"]
    assert len(spawned) == 1  # the child wrote no JUnit file of its own into ours
    props = {p.get("name"): p.get("value") for p in spawned[0].iter("property")}
    assert props["cold_compile.mode"] == "spawn"
    assert props["child_pid"] != (cold.path / "parent.txt").read_text()


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_can_be_forced_from_the_ini_file(cold: pytest.Pytester, mode: str) -> None:
    cold.makeini(f"[pytest]\ncold_compile = true\ncold_compile_mode = {mode}\n")
    cold.makepyfile(f"def test_cold(cold_state):\n    assert cold_state.mode == {mode!r}\n")
    result = run(cold, *LIGHT_PRELOAD)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*{mode}: chosen by ini cold_compile_mode*"])


@pytest.mark.parametrize("mode", ["auto", "zygote"])
def test_xdist_workers_run_cold_tests(cold: pytest.Pytester, mode: str) -> None:
    pytest.importorskip("xdist")
    chosen = "fork" if mode == "auto" else mode
    cold.makepyfile(
        f"""
        import os, pytest
        @pytest.mark.parametrize("i", range(6))
        def test_cold(i, cold_state):
            assert cold_state.cold and cold_state.mode == {chosen!r}
            assert os.environ["PYTEST_XDIST_WORKER"].startswith("gw")
        """
    )
    result = run(cold, "-n", "2", "--cold-compile", f"--cold-compile-mode={mode}", *LIGHT_PRELOAD)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        ["*cold compile summary: 6 cold tests*", f"6 run as {chosen} ({mode}:*"]
    )


PYTEST_FORKED_VICTIM = """
def test_plain():
    assert 1 + 1 == 2

def test_with_output():
    print("output")
"""


def _pytest_forked_cannot_send_reports() -> bool:
    """pytest-forked sends a child's reports back through marshal, which refuses the NodeId
    that pytest 9.2's reports carry; on an earlier pytest its children report as ours do."""
    import marshal

    pytest_forked = pytest.importorskip("pytest_forked")
    report = pytest.TestReport("t.py::t", ("t.py", 0, "t"), {}, "passed", None, "call")
    try:
        marshal.dumps(pytest_forked.serialize_report(report))
    except ValueError:
        return True
    return False


def test_pytest_forked_fails_where_cold_compile_passes(cold: pytest.Pytester) -> None:
    if not _pytest_forked_cannot_send_reports():
        pytest.skip(f"pytest-forked marshals pytest {pytest.__version__}'s reports: its "
                    "children pass these tests too (the failure needs pytest >= 9.2)")
    cold.makepyfile(PYTEST_FORKED_VICTIM)
    forked = run(cold, "--forked")
    forked.assert_outcomes(failed=2)
    forked.stdout.fnmatch_lines(["*EXITED with status 3*"])
    run(cold, "--cold-compile").assert_outcomes(passed=2)


def test_a_spawned_child_gets_the_command_line_minus_what_must_not_reach_it(
    pytester: pytest.Pytester,
) -> None:
    from pytest_coldcompile.isolation import spawn

    pytester.makeini("[pytest]\naddopts = -ra --maxfail=3\n")
    args = [
        "tests",
        "-n",
        "2",
        "--dist=load",
        "--junitxml",
        "out.xml",
        "-k",
        "slow and not gpu",
        "-x",
        "-vv",
        "-p",
        "no:foo",
        # A category pytest's own config parsing never warns with: an editable install makes it
        # warn that pytest_coldcompile is already imported (a UserWarning) in this process.
        "-W",
        "error::ResourceWarning",
        "--tb=short",
        "--cold-compile",
        "--cold-compile-mode=spawn",
        "--cold-compile-report=r.json",
        "-o",
        "xfail_strict=true",
        "-o",
        "addopts=-q",
        "-s",
        "--",
        "more/tests",
    ]
    config = pytester.parseconfig(*args)
    assert spawn.filter_args(args, config) == [
        "-p",
        "no:foo",
        "-W",
        "error::ResourceWarning",
        "--tb=short",
        "-s",
    ]
    cmd = spawn.command(config, "t/test_a.py::test_x[1]", "spec.json", "/tmp/d")
    assert cmd[:3] == [sys.executable, "-m", "pytest"]
    assert "--maxfail=3" not in cmd
    assert "-ra" not in cmd
    assert cmd[cmd.index("-o", 5) : cmd.index("-o", 5) + 2] == ["-o", "xfail_strict=true"]
    assert "addopts=-q" not in cmd
    assert "addopts=" in cmd
    assert cmd[-4:] == [
        "--cold-compile-child",
        "spec.json",
        "--",
        str(config.rootpath / "t/test_a.py::test_x[1]"),
    ]
