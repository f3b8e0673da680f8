"""What a cold child hands back beyond its reports (JUnit XML attributes and suite
properties), and re-collecting children that find another item under the node id."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest
from coldhelp import LIGHT_PRELOAD, conftest, needs_fork, run

pytestmark = needs_fork

JUNIT_TESTS = """
import pytest

@pytest.mark.cold_compile
def test_cold(record_xml_attribute, record_testsuite_property):
    record_xml_attribute("owner", "kernels")
    record_testsuite_property("ARCH", "cold-arch")

def test_in_process(record_xml_attribute, record_testsuite_property):
    record_xml_attribute("owner", "plain")
    record_testsuite_property("WARM", "yes")
"""


@pytest.mark.parametrize("mode", ["fork", "zygote", "spawn"])
def test_junitxml_attributes_and_suite_properties_come_back(
    cold: pytest.Pytester, mode: str
) -> None:
    cold.makepyfile(test_junit=JUNIT_TESTS)
    result = run(
        cold,
        f"--cold-compile-mode={mode}",
        "--junitxml=junit.xml",
        "-o",
        "junit_family=xunit1",
        "-W",
        "ignore::pytest.PytestExperimentalApiWarning",
        *LIGHT_PRELOAD,
    )
    result.assert_outcomes(passed=2)
    root = ElementTree.parse(cold.path / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["test_cold"].get("owner") == "kernels"
    assert cases["test_in_process"].get("owner") == "plain"
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.find("properties") or []}
    assert props == {"ARCH": "cold-arch", "WARM": "yes"}


def test_record_testsuite_property_checks_its_name_in_a_cold_child(cold: pytest.Pytester) -> None:
    cold.makepyfile(
        """
        import pytest

        @pytest.mark.cold_compile
        def test_bad_name(record_testsuite_property):
            record_testsuite_property(1, "x")
        """
    )
    result = run(cold, "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TypeError: name parameter needs to be a string*"])


# The engine puts the item's fingerprint in the spec; a parent that does not yet gets it
# added here, so this test is about the child's side.
FINGERPRINT_SHIM = """
from pytest_coldcompile.child import fingerprint as child
from pytest_coldcompile.isolation import engine

_child_orders = engine.ColdEngine.child_spec

def _with_fingerprint(self, item, test_dir):
    spec = _child_orders(self, item, test_dir)
    spec.setdefault("fingerprint", child.item_fingerprint(item))
    return spec

engine.ColdEngine.child_spec = _with_fingerprint
"""

DIFFERENT_COLLECTION = """
import os, sys, pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = any(arg.startswith("--cold-compile-child") for arg in sys.argv)


class Param:
    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Param({self.value})"


# Ids p0, p1 name positions: the child's list is in another order.
@pytest.mark.parametrize("p", [Param(2), Param(1)] if CHILD else [Param(1), Param(2)])
def test_param(p):
    open(os.path.join(HERE, f"ran-{p.value}"), "w").close()


if not CHILD:
    def test_parent_only():
        pass


@pytest.mark.parametrize("same", [{"b", "a", "c"}])
def test_set_parameter(same):
    pass
"""


def test_a_spawned_child_never_runs_another_parametrization(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(conftest(FINGERPRINT_SHIM))
    pytester.makepyfile(test_recollect=DIFFERENT_COLLECTION)
    result = run(pytester, "--cold-compile", "--cold-compile-mode=spawn", "-rE")
    result.assert_outcomes(errors=3, passed=1)
    assert not list(pytester.path.glob("ran-*")), "a wrong parametrization ran"
    result.stdout.fnmatch_lines(
        [
            "test_recollect.py:*: the re-collecting cold child (spawn) collected a different "
            "item under node id 'test_recollect.py::test_param[[]p0]': params: the parent's "
            "{'p': 'Param(1)'}, the child's {'p': 'Param(2)'}; *the test was not run",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "test_recollect.py:*: the re-collecting cold child (spawn) collected no test with "
            "node id 'test_recollect.py::test_parent_only' (not found: *",
        ]
    )


def test_fingerprints_agree_across_processes_for_sets_and_addresses() -> None:
    from pytest_coldcompile.child.fingerprint import _stable_repr

    class Plain:
        pass

    assert _stable_repr({"b", "a"}) == _stable_repr({"a", "b"}) == "set({'a', 'b'})"
    assert _stable_repr(Plain()) == _stable_repr(Plain())
    assert _stable_repr((1, frozenset({2, 1}))) == "tuple(1, frozenset({1, 2}))"
    assert _stable_repr([1]) != _stable_repr([2])
