"""The fork engine readies the next test's child (forked, caches made, capture and cap set)
while the current test runs; what the tests see and report is what they saw before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coldhelp import needs_fork, needs_modules, run

pytestmark = needs_fork

RECORD_READIED = """
import os
import pytest_coldcompile.child.forked as child

real_ready = child.ready_forked

def ready_forked(item, spec):
    with open(os.path.join(os.environ["READIED_LOG"]), "a") as f:
        f.write(f"{os.getpid()} {item.name}\\n")
    real_ready(item, spec)

child.ready_forked = ready_forked

real_prepare = child.prepare

def prepare(config, spec):
    if spec["nodeid"].endswith("test_b"):
        raise RuntimeError("the set-up of test_b failed")
    return real_prepare(config, spec)

child.prepare = prepare
"""

TESTS = """
import os

def record():
    name = os.environ["PYTEST_CURRENT_TEST"].split("::")[1].split()[0]
    with open(os.environ["RAN_LOG"], "a") as f:
        f.write(f"{os.getpid()} {name} {os.environ['TORCHINDUCTOR_CACHE_DIR']}\\n")

def test_a():
    record()

def test_b():
    record()

def test_c():
    record()
"""


def lines(path: Path) -> dict[str, list[str]]:
    text = path.read_text() if path.exists() else ""
    return {fields[1]: [fields[0], *fields[2:]] for fields in map(str.split, text.splitlines())}


@pytest.mark.parametrize("mode", ["fork", "auto"])
def test_the_next_child_is_readied_during_the_test_before_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    readied_log, ran_log = pytester.path / "readied.log", pytester.path / "ran.log"
    monkeypatch.setenv("READIED_LOG", str(readied_log))
    monkeypatch.setenv("RAN_LOG", str(ran_log))
    pytester.makeconftest(RECORD_READIED)
    pytester.makepyfile(TESTS)
    args = ["--cold-compile"]
    if mode != "auto":
        args.append(f"--cold-compile-mode={mode}")
    result = run(pytester, *args, "-v")
    # test_b's set-up failed ahead of its request: reported as its set-up error, not run.
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_b*", "*the set-up of test_b failed*"])
    readied, ran = lines(readied_log), lines(ran_log)
    assert set(ran) == {"test_a", "test_c"}
    # Each test after the first ran in the child readied for it; the first had no test before.
    assert set(readied) == {"test_b", "test_c"}
    assert ran["test_c"][0] == readied["test_c"][0] != readied["test_b"][0]
    # Each with caches of its own.
    assert ran["test_a"][1] != ran["test_c"][1]


WARM_RECORD = """
import json, os, sys

import torch


def record(name):
    from triton.runtime.cache import triton_key

    seen = {
        # Hashed by the warm-up before the test, else not until this child's first compile.
        "hashed": triton_key.cache_info().currsize == 1,
        "dynamo": "torch._dynamo" in sys.modules,
    }
    if seen["dynamo"]:
        from torch._dynamo.package import DynamoCache

        seen["dynamo_cache_private"] = DynamoCache.path_prefix().startswith(
            os.environ["TORCHINDUCTOR_CACHE_DIR"])
    with open(os.environ["SEEN_LOG"], "a") as f:
        f.write(json.dumps([name, seen]) + "\\n")


def compile_something():
    assert torch.compile(lambda x: x + 1, backend="eager")(torch.ones(3)).sum() == 6
"""

WARM_TESTS = """
from warm_record import compile_something, record


def test_a():
    record("a")


def test_b(compile_counter):
    record("b")


def test_c():
    record("c")
    compile_something()


def test_d():
    record("d")


def test_e():
    record("e")
    compile_something()


def test_f():
    record("f")
    compile_something()
"""

WARM_OTHER_FILE = """
from warm_record import record


def test_g():
    record("g")
"""


@needs_modules("torch", "triton")
def test_a_child_readied_after_a_compile_imports_the_compile_stack_first(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen_log = pytester.path / "seen.log"
    monkeypatch.setenv("SEEN_LOG", str(seen_log))
    pytester.makepyfile(warm_record=WARM_RECORD, test_warm=WARM_TESTS,
                        test_warm_other=WARM_OTHER_FILE)
    pytester.syspathinsert()
    result = run(pytester, "--cold-compile", "--cold-compile-mode=fork",
                 "--cold-compile-report=cold.json", "-p", "no:randomly",
                 "test_warm.py", "test_warm_other.py")
    result.assert_outcomes(passed=7)
    seen = dict(json.loads(line) for line in seen_log.read_text().splitlines())
    report = json.loads((pytester.path / "cold.json").read_text())
    warmed = {name: report[f"{file}::test_{name}"]["warmed_ahead"]
              for file, names in (("test_warm.py", "abcdef"), ("test_warm_other.py", "g"))
              for name in names}
    # Each child is announced as the test before it starts, when the results known are those
    # of the tests before that one. a: the first child, readied for nobody. b: asks for
    # compile_counter. c: its file's last finished test, a, compiled nothing. d: b was last,
    # and compiled nothing. e: c was, and compiled. f: d was. g: another file, where nothing
    # finished yet, though e, in test_warm.py, had compiled.
    assert warmed == {"a": False, "b": True, "c": False, "d": False, "e": True, "f": False,
                      "g": False}
    for name in "acdfg":
        assert not seen[name]["hashed"] and not seen[name]["dynamo"], (name, seen[name])
    for name in "be":
        assert seen[name] == {"hashed": True, "dynamo": True, "dynamo_cache_private": True}, (
            name, seen[name])


BROKEN_WARM_UP = """
import os
import pytest_coldcompile.child.forked as child
from pytest_coldcompile.child import pristine

def warm_compile_stack():
    raise SystemExit("the warm-up broke")

pristine.warm_compile_stack = warm_compile_stack

real_prepare = child.prepare

def prepare(config, spec):
    with open(os.environ["SET_UP_LOG"], "a") as f:
        f.write(spec["nodeid"].split("::")[1] + " " + str(os.getpid()) + "\\n")
    return real_prepare(config, spec)

child.prepare = prepare
"""

BROKEN_WARM_TESTS = """
def test_a():
    pass

def test_b(compile_counter):
    pass
"""


@needs_modules("torch")
def test_a_warm_up_that_breaks_leaves_its_child_ready(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_up_log = pytester.path / "set_up.log"
    monkeypatch.setenv("SET_UP_LOG", str(set_up_log))
    pytester.makeconftest(BROKEN_WARM_UP)
    pytester.makepyfile(test_broken=BROKEN_WARM_TESTS)
    result = run(pytester, "--cold-compile", "--cold-compile-mode=fork",
                 "--cold-compile-report=cold.json", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    report = json.loads((pytester.path / "cold.json").read_text())
    assert report["test_broken.py::test_b"]["warmed_ahead"] is False
    # test_b's child was set up ahead, once; its warm-up raised; it ran without a second set-up.
    # (The server may fork test_b's child again after sharing test_a's first-use imports, and
    # a new child sets up again: once per child is the point.)
    set_ups = [line.split() for line in set_up_log.read_text().splitlines()]
    assert len(set_ups) == len(set(map(tuple, set_ups))), set_ups
    assert {name for name, _ in set_ups} == {"test_a", "test_b"}


@needs_modules("torch")
def test_warm_ahead_false_leaves_every_child_to_import_the_stack_itself(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_off="def test_a():\n    pass\n\n"
                                 "def test_b(compile_counter):\n    pass\n")
    args = ["--cold-compile", "--cold-compile-mode=fork", "--cold-compile-report=cold.json",
            "-p", "no:randomly"]
    for setting, expected in (("true", True), ("false", False)):
        result = run(pytester, *args, "-o", f"cold_compile_warm_ahead={setting}")
        result.assert_outcomes(passed=2)
        report = json.loads((pytester.path / "cold.json").read_text())
        assert report["test_off.py::test_b"]["warmed_ahead"] is expected, setting
