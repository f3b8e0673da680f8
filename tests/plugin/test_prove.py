"""--cold-compile-prove: each test marked guards gets a TEST[prove] item that runs it cold with
its bug active; verdicts caught, vacuous, missed, broken (and unproven), in every mode, under
xdist and -k, in the terminal, JUnit XML and the JSON report. A toy kernel wrapper stands in
for a Triton one: its retry loop catches a fake OutOfResources, and the bug makes it trust a
trace."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest
from coldhelp import needs_fork, run

pytestmark = needs_fork

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "prove"

TOY = '''
import contextlib
import os

TILES = (256, 128, 64)


class OutOfResources(Exception):
    pass


def limit():
    # As gridpair does: the cap --smem-limit sets reaches the child through this variable.
    return int(os.environ.get("PYTEST_COLDCOMPILE_SMEM_LIMIT") or 49152)


def load(tile):
    need = tile * 256
    if need > limit():
        raise OutOfResources(f"out of resource: shared memory, Required: {need}, "
                             f"Hardware limit: {limit()}")


class Selector:
    trust_trace = False

    def __init__(self):
        self.cache = {}

    def choose(self, size, tracing):
        if size not in self.cache:
            for tile in TILES:
                try:
                    if not (tracing and self.trust_trace):
                        load(tile)  # the fix: validate by loading, traced or not
                except OutOfResources:
                    continue
                self.cache[size] = tile
                break
        return self.cache[size]


SELECTOR = Selector()


def kernel(values, tracing=False):
    tile = SELECTOR.choose(len(values), tracing)
    if not tracing:
        load(tile)
    return sum(values)


def compiled(values):
    kernel(values, tracing=True)
    try:
        return kernel(values)
    except OutOfResources as exc:
        raise RuntimeError("the compiled kernel failed to load") from exc


def warm():
    kernel([1.0, 2.0, 3.0])


def warm_size(size):
    kernel([1.0] * size)


def warm_nothing():
    pass


@contextlib.contextmanager
def trusting():
    SELECTOR.trust_trace = True
    try:
        yield
    finally:
        SELECTOR.trust_trace = False


@contextlib.contextmanager
def loses_its_selector():
    global SELECTOR
    saved, SELECTOR = SELECTOR, None
    try:
        yield
    finally:
        SELECTOR = saved


@contextlib.contextmanager
def harmless():
    yield


@contextlib.contextmanager
def needs_a_gpu():
    raise RuntimeError("this bug needs a GPU")
    yield
'''

CONFTEST = '''
import sys

import pytest
import toy


@pytest.fixture
def trusting_fixture():
    with toy.trusting():
        yield


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        print(f"\\ntriton imported here: {'triton' in sys.modules}")
'''

VERDICTS = '''
import pytest
import toy

BUG = pytest.mark.guards(toy.trusting, raises=toy.OutOfResources)


@pytest.mark.guards(toy.trusting, raises=toy.OutOfResources, match="shared memory",
                    masked_by=toy.warm)
def test_caught():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.guards(toy.loses_its_selector, raises=toy.OutOfResources)
def test_vacuous():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.guards(toy.harmless, raises=toy.OutOfResources)
def test_missed():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.guards(toy.needs_a_gpu, raises=toy.OutOfResources)
def test_broken():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@BUG
def test_unproven():
    assert toy.compiled([1.0, 2.0, 3.0]) == 7.0


@pytest.mark.guards("trusting_fixture", raises="toy.OutOfResources")
def test_fixture_bug():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.guards("toy:trusting", raises="toy.OutOfResources")
def test_path_bug():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.guards(toy.trusting, raises=toy.OutOfResources, match="registers")
def test_no_match():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.guards(toy.trusting, raises="lazymod.Missing")
def test_unknown_in_child():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.parametrize("size", [4])
@pytest.mark.guards(toy.trusting, raises=toy.OutOfResources, masked_by=toy.warm_size)
def test_warm_up_takes_the_parameter(size):
    assert toy.compiled([1.0] * size) == size


@pytest.mark.guards(toy.trusting, raises=toy.OutOfResources, masked_by=toy.warm_nothing)
def test_not_masked():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.requires_cuda
@BUG
def test_gpu():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0
'''


@pytest.fixture
def toy(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("COLUMNS", "250")  # the short summary's messages in full
    # The toy's requires_cuda test is skipped on every machine, a GPU one too (the H200 ran it).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(toy=TOY, lazymod="# imported only by a cold child\n")
    pytester.syspathinsert()
    return pytester


def _proofs(path: Path) -> dict[str, dict]:
    return {k: v["proof"] for k, v in json.loads(path.read_text()).items() if "proof" in v}


def _junit_properties(path: Path) -> dict[str, dict[str, str]]:
    out = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        out[case.get("name")] = props
    return out


def test_every_verdict_in_the_terminal_json_and_junit(toy: pytest.Pytester) -> None:
    toy.makepyfile(test_verdicts=VERDICTS)
    result = run(toy, "--cold-compile-prove", "-rA", "--cold-compile-report=cold.json",
                 "--junitxml=junit.xml", "-o", "junit_family=xunit1")
    result.assert_outcomes(passed=14, failed=8, skipped=2)
    out = result.stdout
    out.fnmatch_lines([
        "*--cold-compile-prove: each test marked guards is run again, cold, with its bug "
        "active, as TEST[[]prove[]]",
        "*= cold compile proofs: 5 caught, 2 vacuous, 1 missed, 1 broken, 1 unproven, "
        "1 invalid, 1 skipped =*",
    ])
    out.re_match_lines_random([
        r"^caught +test_verdicts.py::test_caught\[prove\]  toy.OutOfResources at toy.py:\d+; "
        r"warm leg: masked$",
        r"^vacuous +test_verdicts.py::test_vacuous\[prove\]  AttributeError at toy.py:\d+$",
        r"^missed +test_verdicts.py::test_missed\[prove\]  passed with the bug active$",
        r"^skipped +test_verdicts.py::test_gpu\[prove\]  requires_cuda: needs a CUDA device",
    ])
    out.fnmatch_lines([
        "PASSED test_verdicts.py::test_caught[[]prove[]]",
        "PASSED test_verdicts.py::test_fixture_bug[[]prove[]]",
        "PASSED test_verdicts.py::test_path_bug[[]prove[]]",
        "PASSED test_verdicts.py::test_warm_up_takes_the_parameter[[]4-prove[]]",
    ], consecutive=False)
    out.fnmatch_lines([
        "FAILED test_verdicts.py::test_vacuous[[]prove[]] - Failed: vacuous: with the bug "
        "active the test failed with AttributeError: 'NoneType' object has no attribute "
        "'choose' at toy.py:*, not with OutOfResources",
        "FAILED test_verdicts.py::test_missed[[]prove[]] - Failed: missed: the test passed "
        "with the bug active (harmless)",
        "FAILED test_verdicts.py::test_broken[[]prove[]] - Failed: broken: bringing the bug "
        "back (needs_a_gpu) failed: RuntimeError: this bug needs a GPU at toy.py:*",
        "FAILED test_verdicts.py::test_unproven - assert 6.0 == 7.0*",
        "FAILED test_verdicts.py::test_unproven[[]prove[]] - Failed: unproven: without the "
        "bug test_verdicts.py::test_unproven failed (call); a proof counts only where it "
        "passes",
        "FAILED test_verdicts.py::test_no_match[[]prove[]] - Failed: vacuous: with the bug "
        "active the test failed with RuntimeError: the compiled kernel failed to load at "
        "toy.py:*, not with OutOfResources matching 'registers'*",
        "FAILED test_verdicts.py::test_unknown_in_child[[]prove[]] - Failed: invalid: guards "
        "marker of test_verdicts.py::test_unknown_in_child: raises='lazymod.Missing': "
        "'lazymod' has no attribute 'Missing'",
        "FAILED test_verdicts.py::test_not_masked[[]prove[]] - Failed: caught: * at toy.py:*; "
        "not masked: after warm_nothing() the test st*",
    ], consecutive=False)
    out.fnmatch_lines(["*_ test_not_masked[[]prove[]] _*", "caught: the bug made the test fail "
                       "with toy.OutOfResources: *; not masked: after warm_nothing() the test "
                       "still failed with the bug active (caught: *)"])
    # The test and its proof, skipped alike:
    out.fnmatch_lines(["SKIPPED [[]2[]] test_verdicts.py:*: requires_cuda: needs a CUDA device*"])
    out.fnmatch_lines(["triton imported here: False"])  # the proofs' caps are the children's

    proofs = _proofs(toy.path / "cold.json")
    assert set(proofs) == set(f"test_verdicts.py::test_{name}[prove]" for name in (
        "caught", "vacuous", "missed", "broken", "unproven", "fixture_bug", "path_bug",
        "no_match", "unknown_in_child", "gpu", "not_masked")) | {
        "test_verdicts.py::test_warm_up_takes_the_parameter[4-prove]"}
    caught = proofs["test_verdicts.py::test_caught[prove]"]
    assert caught["guards"] == "test_verdicts.py::test_caught"
    assert caught["verdict"] == "caught"
    assert caught["exception"] == "toy.OutOfResources"  # found through __cause__
    assert caught["message"].startswith("out of resource: shared memory, Required: 65536")
    assert caught["location"].startswith("toy.py:")
    assert caught["masked"] == "masked"
    vacuous = proofs["test_verdicts.py::test_vacuous[prove]"]
    assert (vacuous["verdict"], vacuous["exception"]) == ("vacuous", "AttributeError")
    assert vacuous["message"] == "'NoneType' object has no attribute 'choose'"
    assert vacuous["location"].startswith("toy.py:")
    assert proofs["test_verdicts.py::test_missed[prove]"]["verdict"] == "missed"
    no_match = proofs["test_verdicts.py::test_no_match[prove]"]
    assert no_match["detail"].startswith(
        "toy.OutOfResources was raised, but its message does not match 'registers': out of "
        "resource: shared memory")
    broken = proofs["test_verdicts.py::test_broken[prove]"]
    assert (broken["verdict"], broken["exception"]) == ("broken", "RuntimeError")
    assert proofs["test_verdicts.py::test_gpu[prove]"]["verdict"] == "skipped"
    assert proofs["test_verdicts.py::test_not_masked[prove]"]["masked"] == "not masked"
    assert proofs["test_verdicts.py::test_warm_up_takes_the_parameter[4-prove]"]["masked"] == (
        "masked")
    records = json.loads((toy.path / "cold.json").read_text())
    record = records["test_verdicts.py::test_caught[prove]"]
    assert record["outcome"] == "passed" and record["mode"] == "fork"

    junit = _junit_properties(toy.path / "junit.xml")
    assert junit["test_caught[prove]"]["cold_compile.proof.verdict"] == "caught"
    assert junit["test_caught[prove]"]["cold_compile.proof.masked"] == "masked"
    assert junit["test_vacuous[prove]"]["cold_compile.proof.exception"] == "AttributeError"
    assert "cold_compile.proof.verdict" not in junit["test_caught"]


SMALL = '''
import pytest
import toy


@pytest.mark.guards(toy.trusting, raises=toy.OutOfResources, masked_by=toy.warm)
def test_caught():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.cold_compile
@pytest.mark.guards("trusting_fixture", raises="toy.OutOfResources")
def test_fixture_bug():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.guards(toy.loses_its_selector, raises=toy.OutOfResources)
def test_vacuous():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0
'''


@pytest.mark.parametrize("mode", ["fork", "zygote", "spawn"])
def test_each_mode_proves_with_the_cap_of_smem_limit(toy: pytest.Pytester, mode: str) -> None:
    toy.makepyfile(test_small=SMALL)
    # The toy device is bigger than this cap: without it every tile fits and nothing is caught.
    toy.makepyfile(lazymod="")
    toy.path.joinpath("toy.py").write_text(TOY.replace("or 49152", "or 10**9"))
    result = run(toy, "--cold-compile-prove", f"--cold-compile-mode={mode}",
                 "--smem-limit=49152", "-p", "no:randomly")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines([
        f"cold-compile: {mode} (*",
        "*= cold compile proofs: 2 caught, 1 vacuous =*",
    ])
    result.stdout.re_match_lines_random([
        r"^caught +test_small.py::test_caught\[prove\]  toy.OutOfResources at toy.py:\d+; "
        r"warm leg: masked$",
        r"^caught +test_small.py::test_fixture_bug\[prove\]  toy.OutOfResources at toy.py:\d+$",
    ])


def test_without_the_option_the_mark_changes_nothing(toy: pytest.Pytester) -> None:
    toy.makepyfile(test_verdicts=VERDICTS.replace('raises="lazymod.Missing"', "raises=42"))
    result = run(toy, "-rA")
    result.assert_outcomes(passed=10, failed=1, skipped=1)
    assert "[prove]" not in result.stdout.str()


def test_under_xdist_the_controller_lists_every_proof(toy: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    toy.makepyfile(test_small=SMALL)
    result = run(toy, "--cold-compile-prove", "-n", "2", "--cold-compile-report=cold.json",
                 "-rA")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*= cold compile proofs: 2 caught, 1 vacuous =*"])
    proofs = _proofs(toy.path / "cold.json")
    assert {k: v["verdict"] for k, v in proofs.items()} == {
        "test_small.py::test_caught[prove]": "caught",
        "test_small.py::test_fixture_bug[prove]": "caught",
        "test_small.py::test_vacuous[prove]": "vacuous",
    }
    assert proofs["test_small.py::test_caught[prove]"]["masked"] == "masked"


KEYWORD = '''
import pytest
import toy


@pytest.mark.guards(toy.trusting, raises=toy.OutOfResources)
def test_caught():
    assert toy.compiled([1.0, 2.0, 3.0]) == 6.0


@pytest.mark.guards(toy.trusting, raises=toy.OutOfResources)
def test_fails_itself():
    assert toy.compiled([1.0, 2.0, 3.0]) == 7.0
'''


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_k_prove_runs_the_proofs_alone_each_running_its_test_first(
    toy: pytest.Pytester, mode: str
) -> None:
    toy.makepyfile(test_keyword=KEYWORD)
    result = run(toy, "--cold-compile-prove", "-k", "prove", f"--cold-compile-mode={mode}",
                 "-rA")
    result.assert_outcomes(passed=1, failed=1, deselected=2)
    result.stdout.fnmatch_lines([
        "collected 4 items / 2 deselected / 2 selected",
        "*Captured unmutated run call*",
        "*assert 6.0 == 7.0*",
        "PASSED test_keyword.py::test_caught[[]prove[]]",
        "FAILED test_keyword.py::test_fails_itself[[]prove[]] - Failed: unproven: without the bug "
        "test_keyword.py::test_fails_itself failed (call)*",
    ], consecutive=False)


def test_the_example_copied_into_a_project_proves_its_regressions(
    pytester: pytest.Pytester,
) -> None:
    for path in EXAMPLE.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            target = pytester.path / path.relative_to(EXAMPLE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    result = run(pytester, "--cold-compile-prove", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*= cold compile proofs: 2 caught =*"])
    proofs = _proofs(pytester.path / "cold.json")
    assert {k: (v["verdict"], v["exception"], v.get("masked")) for k, v in proofs.items()} == {
        "tests/test_kernels.py::test_compiled_sum_runs_cold[prove]":
            ("caught", "toykernels.launch.OutOfResources", "masked"),
        "tests/test_kernels.py::test_a_tile_chosen_while_tracing_loads[prove]":
            ("caught", "toykernels.launch.OutOfResources", None),
    }


DYING = '''
import contextlib
import os
import time

import pytest


@contextlib.contextmanager
def exits():
    os._exit(3)
    yield


@contextlib.contextmanager
def hangs():
    os.environ["HANG"] = "1"
    yield


@pytest.mark.guards(exits, raises=MemoryError)
def test_bug_kills_its_child():
    pass


@pytest.mark.guards(hangs, raises=MemoryError)
def test_bug_hangs_the_test():
    if os.environ.get("HANG"):
        time.sleep(60)
'''


def test_a_child_that_dies_is_judged_by_where_it_died(toy: pytest.Pytester) -> None:
    toy.makepyfile(test_dying=DYING)
    result = run(toy, "--cold-compile-prove", "--cold-compile-timeout=3", "-rA")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "FAILED test_dying.py::test_bug_kills_its_child[[]prove[]] - Failed: broken: bringing "
        "the bug back (exits): the cold child died while the bug was brought back: "
        "test_dying.py:*: the cold child EXITED with status 3 *",
        "FAILED test_dying.py::test_bug_hangs_the_test[[]prove[]] - Failed: vacuous: with the "
        "bug active, not MemoryError: test_dying.py:*: timeout: the cold child ran longer than "
        "3 s (--cold-compile-timeout)*",
    ], consecutive=False)
