"""Launch selectors: registration, entry points (loaded lazily), resets, launch_events.

What a cold child does with selectors runs in a subprocess; the registry's behaviour in one
process runs in-process, from a fresh registry (coldhelp.fresh_selector_registry).
"""

from __future__ import annotations

import pytest
from coldhelp import (
    conftest,
    fake_distribution,
    fresh_selector_registry,
    needs_fork,
    run,
    run_inprocess,
)

SELECTOR_MODULE = """
import os

with open("imported.txt", "a") as f:  # proves when the module is imported, and where
    f.write(f"{os.getpid()}\\n")


class Event:
    def __init__(self, kind, op, shared=0, outcome="fits"):
        self.kind, self.op, self.outcome = kind, op, outcome
        self.config = {"BLOCK": 64}
        self.resources = {"shared": shared, "limit": 101376}


class FakeSelector:
    name = "fake"

    def __init__(self):
        self.listeners = []
        self.resets = 0
        self.cache = {}

    def reset(self):
        self.resets += 1
        self.cache.clear()

    def subscribe(self, listener):
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def emit(self, kind, op, shared=0, outcome="fits"):
        for listener in list(self.listeners):
            listener(Event(kind, op, shared, outcome))


SELECTOR = FakeSelector()


def make_selector():
    return SELECTOR
"""


@pytest.fixture
def with_fake_selector(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(fakesel=SELECTOR_MODULE)
    pytester.makeconftest(conftest())
    return pytester


def run_as(pytester: pytest.Pytester, how: str, *args: str) -> pytest.RunResult:
    """`how` is "cold" (every test in a cold child: a subprocess) or "in-process" (no child:
    this process, from a fresh registry, after fake_distribution)."""
    if how == "cold":
        return run(pytester, "--cold-compile", *args)
    fresh_selector_registry(pytester)
    return run_inprocess(pytester, *args)


EVENTS_TEST = """
import pytest
import fakesel

def test_events(launch_events):
    sel = fakesel.SELECTOR
    sel.emit("probe", "fwd", 79872)
    sel.emit("probe", "fwd", 131072, "out_of_resources")
    sel.emit("admit", "fwd", 79872)
    with launch_events.window() as w:
        sel.emit("probe", "bwd", 65536)
        sel.emit("fallback", "bwd2", 0, "out_of_resources")
    sel.emit("admit", "bwd", 65536)
    assert [e.op for e in launch_events.probed] == ["fwd", "fwd", "bwd"]
    assert launch_events.ops("admitted") == {"fwd", "bwd"}
    assert launch_events.ops("fallback") == {"bwd2"}
    assert w.ops("probed") == {"bwd"} and w.ops("fallback") == {"bwd2"} and w.admitted == []
    event = launch_events.admitted[0]
    assert (event.kind, event.op, event.outcome) == ("admit", "fwd", "fits")
    assert event.config == {"BLOCK": 64}
    assert event.resources == {"shared": 79872, "limit": 101376}
    assert event.selector == "fake"
    launch_events.clear()
    assert len(launch_events) == 0 and launch_events.probed == []
    with pytest.raises(ValueError, match="kind must be one of 'probed', 'admitted', 'fallback'"):
        launch_events.ops("admits")
    sel.emit("admit", "fwd", 100000)
"""


@pytest.mark.parametrize("how", ["in-process", "cold"])
def test_launch_events_from_an_entry_point_selector(
    with_fake_selector: pytest.Pytester, how: str
) -> None:
    fake_distribution(with_fake_selector, "fakesel", {"fake": "fakesel:SELECTOR"})
    with_fake_selector.makepyfile(test_events=EVENTS_TEST)
    result = run_as(with_fake_selector, how)
    result.assert_outcomes(passed=1)
    if how == "cold":
        # the summary counts every event of the child, cleared or not: 3 probed, 3 admitted,
        # 1 fallback, largest admitted shared memory 100000
        result.stdout.fnmatch_lines(["*test_events.py::test_events *passed* 3 * 3 * 1 * 100000"])


@needs_fork
def test_entry_points_are_not_imported_without_need(with_fake_selector: pytest.Pytester) -> None:
    fake_distribution(with_fake_selector, "fakesel", {"fake": "fakesel:SELECTOR"})
    with_fake_selector.makepyfile("def test_plain():\n    pass\n")
    run_as(with_fake_selector, "in-process").assert_outcomes(passed=1)
    run_as(with_fake_selector, "cold").assert_outcomes(passed=1)
    assert not (with_fake_selector.path / "imported.txt").exists()


@needs_fork
def test_an_imported_selector_is_reset_in_each_cold_child(
    with_fake_selector: pytest.Pytester,
) -> None:
    fake_distribution(with_fake_selector, "fakesel", {"fake": "fakesel:SELECTOR"})
    with_fake_selector.makepyfile(
        """
        import os, fakesel
        fakesel.SELECTOR.cache["from collection"] = 1

        def test_a():
            assert fakesel.SELECTOR.cache == {} and fakesel.SELECTOR.resets == 1
            fakesel.SELECTOR.cache["a"] = 1

        def test_b():
            assert fakesel.SELECTOR.cache == {} and fakesel.SELECTOR.resets == 1
        """
    )
    run(with_fake_selector, "--cold-compile").assert_outcomes(passed=2)
    # Imported once, at collection, by the pytest process: children inherit the module.
    assert len((with_fake_selector.path / "imported.txt").read_text().split()) == 1


@needs_fork
def test_a_selector_imported_during_a_cold_test_is_reset_and_counted(
    with_fake_selector: pytest.Pytester,
) -> None:
    fake_distribution(with_fake_selector, "fakesel", {"fake": "fakesel:make_selector"})
    with_fake_selector.makepyfile(
        """
        def test_lazy():
            import fakesel  # first import, inside the cold child
            assert fakesel.SELECTOR.resets == 1
            fakesel.SELECTOR.emit("admit", "fwd", 4096)
        """
    )
    result = run(with_fake_selector, "--cold-compile")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*::test_lazy *passed* 0 * 1 * 0 * 4096"])


@pytest.mark.parametrize("how", ["in-process", "cold"])
def test_a_selector_imported_during_a_test_is_seen_by_launch_events(
    with_fake_selector: pytest.Pytester, how: str
) -> None:
    fake_distribution(with_fake_selector, "fakesel", {"fake": "fakesel:SELECTOR"})
    with_fake_selector.makepyfile(
        """
        import sys

        def test_lazy(launch_events):
            assert "fakesel" not in sys.modules  # launch_events imported nothing
            import fakesel
            fakesel.SELECTOR.emit("admit", "fwd", 4096)
            assert launch_events.ops("admitted") == {"fwd"}
        """
    )
    run_as(with_fake_selector, how).assert_outcomes(passed=1)


NO_GRIDPAIR_CONFTEST = """
import os
import sys


def pytest_sessionfinish(session):  # the pytest process, and a spawned child's own session
    with open(f"modules-{os.getpid()}.txt", "w") as f:
        f.write(f"gridpair imported: {'gridpair' in sys.modules}")
"""

NO_GRIDPAIR_TESTS = """
import sys

import pytest
import pytest_coldcompile.selectors as selectors


def test_listed():
    if "gridpair" not in [ep.name for ep in selectors.entry_points()]:
        pytest.skip("gridpair's selector entry point is not installed here")


def test_in_process(launch_events, cold_state):
    assert not cold_state.cold
    assert "gridpair" not in sys.modules and "torch" not in sys.modules


@pytest.mark.cold_compile
def test_cold(launch_events, cold_state):
    assert cold_state.cold
    assert "gridpair" not in sys.modules
    if cold_state.mode != "zygote":  # the zygote preloads torch and triton, never gridpair
        assert "torch" not in sys.modules
"""


@pytest.mark.parametrize("mode", ["fork", "zygote", "spawn"])
def test_a_project_that_never_imports_gridpair_never_imports_it(
    pytester: pytest.Pytester, mode: str
) -> None:
    """gridpair's entry point is installed with this distribution: it must stay unimported."""
    pytester.makeconftest(NO_GRIDPAIR_CONFTEST)
    pytester.makepyfile(test_downstream=NO_GRIDPAIR_TESTS)
    result = run(pytester, f"--cold-compile-mode={mode}", "-rs")
    outcomes = result.parseoutcomes()
    if outcomes.get("skipped"):
        pytest.skip("gridpair's selector entry point is not installed here")
    result.assert_outcomes(passed=3)
    seen = [p.read_text() for p in pytester.path.glob("modules-*.txt")]
    assert seen and set(seen) == {"gridpair imported: False"}


def test_register_selector_from_a_conftest(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(fakesel=SELECTOR_MODULE)
    pytester.makeconftest(
        conftest(
            "import fakesel, pytest_coldcompile\n"
            "pytest_coldcompile.register_selector(fakesel.SELECTOR)\n"
        )
    )
    pytester.makepyfile(
        """
        import pytest, fakesel

        def test_in_process(launch_events):
            fakesel.SELECTOR.emit("probe", "fwd")
            assert launch_events.ops("probed") == {"fwd"}
            assert fakesel.SELECTOR.resets == 0  # in-process tests are not reset

        @pytest.mark.cold_compile
        def test_cold(launch_events):
            assert fakesel.SELECTOR.resets == 1
            fakesel.SELECTOR.emit("fallback", "bwd2", outcome="out_of_resources")
            assert [e.outcome for e in launch_events.fallback] == ["out_of_resources"]
        """
    )
    run(pytester).assert_outcomes(passed=2)


def test_a_broken_entry_point_is_an_error_naming_it(with_fake_selector: pytest.Pytester) -> None:
    fake_distribution(with_fake_selector, "fakesel", {"broken": "fakesel:NO_SUCH_NAME"})
    with_fake_selector.makepyfile(
        """
        import pytest
        import fakesel  # a selector module nobody imports is never loaded, broken or not
        def test_in_process(launch_events):
            pass
        @pytest.mark.cold_compile
        def test_cold(launch_events):
            pass
        """
    )
    result = run(with_fake_selector)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*SelectorError: selector entry point 'broken' (fakesel:NO_SUCH_NAME) in group "
            "'pytest_coldcompile.selectors' failed to load: AttributeError*"
        ]
        * 2
    )


@pytest.mark.parametrize("how", ["in-process", "cold"])
def test_a_broken_entry_point_imported_during_a_test_fails_that_test(
    with_fake_selector: pytest.Pytester, how: str
) -> None:
    """The test that imported the selector's module is the one told, not the next one that
    asks for launch events."""
    fake_distribution(with_fake_selector, "fakesel", {"broken": "fakesel:NO_SUCH_NAME"})
    with_fake_selector.makepyfile(
        """
        def test_imports_it(launch_events):
            import fakesel  # noqa: F401

        def test_after(launch_events):
            pass
        """
    )
    result = run_as(with_fake_selector, how, "-p", "no:randomly")
    # Cold, the import itself raises; in-process, the test's teardown (and every later test
    # that asks for events while the module stays imported).
    where = "*_ test_imports_it _*" if how == "cold" else "*ERROR at teardown of test_imports_it*"
    result.stdout.fnmatch_lines(
        [
            where,
            "*SelectorError: selector entry point 'broken' (fakesel:NO_SUCH_NAME)*failed to "
            "load*",
        ]
    )
    if how == "cold":  # a child of its own, which has not imported it
        result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["*failed to load: AttributeError: module 'fakesel' has no attribute 'NO_SUCH_NAME'*"]
    )
    assert "most likely due to a circular import" not in result.stdout.str()


def test_register_selector_rejects_what_is_not_a_selector() -> None:
    from pytest_coldcompile import register_selector

    with pytest.raises(TypeError, match="lacks reset, subscribe"):
        register_selector(type("Half", (), {"name": "half"})())


def test_launch_event_copies_a_duck_typed_event() -> None:
    from types import SimpleNamespace

    from pytest_coldcompile import LaunchEvent

    config = {"BLOCK": 32}
    raw = SimpleNamespace(
        kind="admit", op="fwd", config=config, resources={"shared": 1}, outcome="cached"
    )
    event = LaunchEvent.from_event(raw, "sel")
    config["BLOCK"] = 64  # the selector reusing its mapping must not change what was recorded
    assert event == LaunchEvent("admit", "fwd", {"BLOCK": 32}, {"shared": 1}, "cached", "sel")
