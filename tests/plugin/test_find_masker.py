"""--cold-compile-find-masker: for each test that fails cold, the earlier test whose warm state
hides the failure in a plain run, and the state (selector admission cached, FX-graph cache hit,
...); its own verdict where nothing earlier masks it or where it passes alone.

The suites use a toy selector that admits "cached" once it has chosen in this process, and
whose cold choice for a traced call is wrong: an eager call in an earlier test warms it, as
gridpair's selector was warmed in the bug this project exists for.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from coldhelp import needs_fork, needs_modules, run

pytestmark = needs_fork

TOYSEL = '''
class Event:
    def __init__(self, kind, op, config, outcome):
        self.kind, self.op, self.config, self.outcome = kind, op, config, outcome
        self.resources = {"shared": 1024, "limit": 4096}


class WarmingSelector:
    """Chooses a tile per op and caches it; a traced call cannot validate cold and picks a
    tile that does not fit (the bug), an eager one validates and caches the right one."""

    name = "gridpair"

    def __init__(self):
        self.cache, self.listeners = {}, []

    def reset(self):
        self.cache.clear()

    def subscribe(self, listener):
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def _emit(self, *args):
        for listener in list(self.listeners):
            listener(Event(*args))

    def choose(self, op, traced=False):
        if op in self.cache:
            self._emit("admit", op, {"TILE": self.cache[op]}, "cached")
            return self.cache[op]
        if traced:
            self._emit("admit", op, {"TILE": 256}, "fits")
            return 256
        self.cache[op] = 64
        self._emit("admit", op, {"TILE": 64}, "fits")
        return 64


SELECTOR = WarmingSelector()
'''

CONFTEST = '''
import pytest_coldcompile
from toysel import SELECTOR

pytest_coldcompile.register_selector(SELECTOR)
'''


def _suite(masker_at: int, target_at: int, total: int, extra: str = "") -> str:
    """total tests: the masker (an eager call of op fwd) at masker_at, the target (a traced
    call of fwd, right only when warm) at target_at, the others trivial or warming op bwd."""
    lines = ["from toysel import SELECTOR", ""]
    for i in range(total):
        if i == masker_at:
            body = 'assert SELECTOR.choose("fwd") == 64'
            name = f"test_{i:02d}_warms"
        elif i == target_at:
            body = 'assert SELECTOR.choose("fwd", traced=True) == 64'
            name = f"test_{i:02d}_compiled"
        elif i % 3 == 0:
            body = 'assert SELECTOR.choose("bwd") == 64'
            name = f"test_{i:02d}_other_op"
        else:
            body = "assert True"
            name = f"test_{i:02d}_trivial"
        lines += [f"def {name}():", f"    {body}", ""]
    return "\n".join(lines) + textwrap.dedent(extra)


def _write(pytester: pytest.Pytester, suite: str, name: str = "test_suite") -> None:
    pytester.makepyfile(toysel=TOYSEL)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(**{name: suite})


def _records(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "cold.json").read_text())


def _masker(records: dict, name: str) -> dict:
    return next(v["masker"] for k, v in records.items() if k.endswith("::" + name))


def test_the_early_test_that_warms_a_selector_is_named(pytester: pytest.Pytester) -> None:
    """22 tests, one early test warms the selector, a later traced one fails cold; a test
    that fails whatever ran before gets "not masked"."""
    _write(pytester, _suite(4, 14, 22, '''
        def test_22_always_fails():
            assert SELECTOR.choose("fwd", traced=True) == 0
        '''))
    result = run(pytester, "--cold-compile", "--cold-compile-mode=fork",
                 "--cold-compile-find-masker", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=21, failed=2)  # the search changes no outcome
    result.stdout.fnmatch_lines([
        "*= cold compile maskers: 2 tests failed cold, 1 masked by an earlier test =*",
        "test_suite.py::test_14_compiled fails cold; masked by test_suite.py::test_04_warms "
        "(selector gridpair: admission cached); 7 cold children for 14 earlier tests",
        "test_suite.py::test_22_always_fails fails cold; not masked: fails alone and after the "
        "22 earlier tests in one process: nothing earlier masks it; 2 cold children for 22 "
        "earlier tests",
    ])
    records = _records(pytester)
    masker = _masker(records, "test_14_compiled")
    assert masker["verdict"] == "masked"
    assert masker["nodeid"] == "test_suite.py::test_04_warms"
    assert masker["state"] == "selector admission cached"
    assert masker["states"] == ["selector gridpair: admission cached"]
    assert masker["with"] == []
    # alone, after all 14, ceil(log2(14)) = 4 prefixes, the masker alone
    assert (masker["candidates"], masker["children"]) == (14, 7)
    never = _masker(records, "test_22_always_fails")
    assert never["verdict"] == "not masked" and never["nodeid"] is None
    assert never["state"] is None and never["children"] == 2
    assert all(v["masker"] is None for k, v in records.items()
               if not k.endswith(("test_14_compiled", "test_22_always_fails")))


def test_a_test_that_passes_alone_is_not_given_a_masker(pytester: pytest.Pytester) -> None:
    """Pollution the other way: an earlier test leaves a file that makes a later one fail
    (what no process boundary isolates); alone, the later one passes."""
    pytester.makepyfile(test_files='''
        import os

        LEFT = os.path.join(os.path.dirname(__file__), "left-behind")

        def test_a_leaves_a_file():
            open(LEFT, "w").close()

        def test_b_trivial():
            pass

        def test_c_consumes_it():
            if os.path.exists(LEFT):
                os.remove(LEFT)
                raise AssertionError("an earlier test left a file")
        ''')
    result = run(pytester, "--cold-compile", "--cold-compile-mode=fork",
                 "--cold-compile-find-masker", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "test_files.py::test_c_consumes_it fails cold; passes alone: passes alone in a fresh "
        "cold child: its cold failure depends on something else than an earlier test's "
        "process state*; 1 cold children for 2 earlier tests",
    ])
    masker = _masker(_records(pytester), "test_c_consumes_it")
    assert masker["verdict"] == "passes alone" and masker["nodeid"] is None


def test_a_masker_that_needs_an_earlier_test_is_named_with_it(
    pytester: pytest.Pytester,
) -> None:
    """Two tests mask together: the second caches only after the first enabled it."""
    pytester.makepyfile(toysel=TOYSEL)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_pair='''
        from toysel import SELECTOR
        import toysel

        def test_0_trivial():
            pass

        def test_1_enables():
            toysel.ENABLED = True

        def test_2_trivial():
            pass

        def test_3_warms_if_enabled():
            if getattr(toysel, "ENABLED", False):
                SELECTOR.choose("fwd")

        def test_4_compiled():
            assert SELECTOR.choose("fwd", traced=True) == 64
        ''')
    result = run(pytester, "--cold-compile", "--cold-compile-mode=fork",
                 "--cold-compile-find-masker", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=4, failed=1)
    masker = _masker(_records(pytester), "test_4_compiled")
    assert masker["nodeid"] == "test_pair.py::test_3_warms_if_enabled"
    assert masker["with"] == ["test_pair.py::test_1_enables", "test_pair.py::test_2_trivial"]
    assert masker["state"] == "selector admission cached"


@pytest.mark.parametrize("mode", ["zygote", "spawn"])
def test_re_collecting_children_run_the_earlier_tests_too(
    pytester: pytest.Pytester, mode: str
) -> None:
    _write(pytester, _suite(1, 4, 6))
    result = run(pytester, "--cold-compile", f"--cold-compile-mode={mode}",
                 "--cold-compile-find-masker", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=5, failed=1)
    masker = _masker(_records(pytester), "test_04_compiled")
    assert masker["nodeid"] == "test_suite.py::test_01_warms", masker
    assert masker["state"] == "selector admission cached"
    # alone, after all 4, 2 prefixes, the masker alone
    assert masker["children"] == 5


def test_with_k_the_earlier_tests_are_the_selected_ones(pytester: pytest.Pytester) -> None:
    """-k deselects the masker: nothing selected before the target masks it."""
    _write(pytester, _suite(1, 4, 6))
    result = run(pytester, "--cold-compile", "--cold-compile-mode=fork", "-k", "not warms",
                 "--cold-compile-find-masker", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=4, failed=1)
    masker = _masker(_records(pytester), "test_04_compiled")
    assert masker["verdict"] == "not masked" and masker["candidates"] == 3


@needs_modules("xdist")
def test_under_xdist_the_earlier_tests_are_the_workers(pytester: pytest.Pytester) -> None:
    _write(pytester, _suite(1, 4, 6))
    pytester.makepyfile(test_other="def test_elsewhere():\n    pass\n")
    result = run(pytester, "-p", "xdist", "-n", "2", "--dist", "loadfile", "--cold-compile",
                 "--cold-compile-mode=fork", "--cold-compile-find-masker",
                 "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines([
        "test_suite.py::test_04_compiled fails cold; masked by test_suite.py::test_01_warms "
        "(selector gridpair: admission cached); 5 cold children for 4 earlier tests",
    ])


def test_the_ini_key_turns_it_on_and_a_bad_value_is_named(pytester: pytest.Pytester) -> None:
    _write(pytester, _suite(0, 1, 2))
    pytester.makeini("[pytest]\ncold_compile_find_masker = true\n")
    result = run(pytester, "--cold-compile", "--cold-compile-mode=fork")
    result.stdout.fnmatch_lines(["*test_01_compiled fails cold; masked by *test_00_warms*"])
    pytester.makeini("[pytest]\ncold_compile_find_masker = maybe\n")
    result = run(pytester, "--cold-compile")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini cold_compile_find_masker: expected true or false*"])


FX_SUITE = '''
import torch

import torch._inductor.compile_fx as compile_fx


def f(x):
    return torch.sin(x) * 2 + 1


def _codegen_bug(*args, **kwargs):
    raise RuntimeError("a codegen bug that only a compile from scratch meets")


{tests}

def test_{target:02d}_compiled(monkeypatch):
    # Inductor's code generation fails (the bug); a hit in the FX-graph cache skips it.
    monkeypatch.setattr(compile_fx, "fx_codegen_and_compile", _codegen_bug)
    torch._dynamo.reset()
    out = torch.compile(lambda x: torch.sin(x) * 2 + 1)(torch.ones(4))
    assert torch.equal(out, f(torch.ones(4)))
'''


@needs_modules("torch")
def test_an_fx_graph_cache_hit_is_named(pytester: pytest.Pytester) -> None:
    tests = []
    for i in range(20):
        if i == 3:
            tests.append(f"def test_{i:02d}_compiles():\n    x = torch.ones(4)\n"
                         "    assert torch.equal(torch.compile(f)(x), f(x))\n")
        else:
            tests.append(f"def test_{i:02d}_trivial():\n    assert f(torch.zeros(1)).item() == 1\n")
    pytester.makepyfile(test_fx=FX_SUITE.format(tests="\n".join(tests), target=20))
    result = run(pytester, "--cold-compile", "--cold-compile-mode=fork",
                 "--cold-compile-find-masker", "--cold-compile-report=cold.json", timeout=600)
    result.assert_outcomes(passed=20, failed=1)
    masker = _masker(_records(pytester), "test_20_compiled")
    assert masker["nodeid"] == "test_fx.py::test_03_compiles", masker
    assert masker["state"] == "FX-graph cache hit", masker
    result.stdout.fnmatch_lines(
        ["test_fx.py::test_20_compiled fails cold; masked by test_fx.py::test_03_compiles "
         "(FX-graph cache hit*"])


def test_a_triton_kernel_found_in_the_cache_is_named(pytester: pytest.Pytester) -> None:
    """What the finder observes of Triton: the kernels a test compiled into its child's
    Triton cache (<hash>/<name>.json) alone and not after the masker. Stood in for here by a
    "compile" that writes the entry where it is missing and fails (the cold bug), as a
    kernel compiled from scratch would, with no GPU needed."""
    pytester.makepyfile(test_kernels='''
        import os

        def _kernel(fail_if_compiled):
            entry = os.path.join(os.environ["TRITON_CACHE_DIR"], "4f2a", "matmul_kernel.json")
            if os.path.exists(entry):
                return
            os.makedirs(os.path.dirname(entry), exist_ok=True)
            open(entry, "w").close()
            assert not fail_if_compiled, "compiled from scratch"

        def test_0_trivial():
            pass

        def test_1_compiles_the_kernel():
            _kernel(False)

        def test_2_trivial():
            pass

        def test_3_needs_it_cached():
            _kernel(True)
        ''')
    result = run(pytester, "--cold-compile", "--cold-compile-mode=fork",
                 "--cold-compile-find-masker", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=3, failed=1)
    masker = _masker(_records(pytester), "test_3_needs_it_cached")
    assert masker["nodeid"] == "test_kernels.py::test_1_compiles_the_kernel", masker
    assert masker["state"] == "Triton kernel found in the cache"
    assert masker["states"] == ["Triton kernel matmul_kernel found in the cache"]


def test_a_masker_that_leaves_no_observed_state_is_other_process_state(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_globals='''
        import os

        def test_0_sets_a_flag():
            os.environ["MASKER_WAS_HERE"] = "1"

        def test_1_needs_the_flag():
            assert os.environ.get("MASKER_WAS_HERE") == "1"
        ''')
    result = run(pytester, "--cold-compile", "--cold-compile-mode=fork",
                 "--cold-compile-find-masker", "--cold-compile-report=cold.json")
    result.stdout.fnmatch_lines([
        "test_globals.py::test_1_needs_the_flag fails cold; masked by "
        "test_globals.py::test_0_sets_a_flag (other process state); 2 cold children for 1 "
        "earlier tests",
    ])
    masker = _masker(_records(pytester), "test_1_needs_the_flag")
    assert (masker["state"], masker["children"]) == ("other process state", 2)


@needs_modules("pytest_rerunfailures")
def test_a_rerun_is_searched_once_and_its_record_keeps_the_masker(
    pytester: pytest.Pytester,
) -> None:
    _write(pytester, _suite(1, 3, 4))
    result = run(pytester, "-p", "rerunfailures", "--reruns", "1", "--cold-compile",
                 "--cold-compile-mode=fork", "--cold-compile-find-masker",
                 "--cold-compile-report=cold.json")
    assert result.parseoutcomes() == {"passed": 3, "failed": 1, "rerun": 1}
    result.stdout.fnmatch_lines([
        "test_suite.py::test_03_compiled fails cold; masked by test_suite.py::test_01_warms "
        "(selector gridpair: admission cached); 5 cold children for 3 earlier tests",
    ])
    masker = _masker(_records(pytester), "test_03_compiled")
    assert masker["nodeid"] == "test_suite.py::test_01_warms"
