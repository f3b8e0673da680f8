"""Bad guards markers and settings of --cold-compile-prove: a collection error (or usage error)
naming the marker, the test and what is wrong, before anything runs."""

from __future__ import annotations

import pytest

HEADER = '''
import contextlib
import pytest


@contextlib.contextmanager
def bug():
    yield


@pytest.fixture
def bug_fixture():
    yield

'''

BAD = [
    ("guards(raises=ValueError)", "missing the bug to bring back; expected guards(bug, "
     "raises=EXC, match=None, masked_by=None)"),
    # guards(bug) alone would be pytest's mark-as-decorator form: with_args says it is not.
    ("guards.with_args(bug)", "missing raises=, the exception the bug must produce; expected "
     "guards(bug, raises=EXC, match=None, masked_by=None)"),
    ("guards(bug, raises=int)", "raises=int is not an exception type (got type <class 'int'>)"),
    ("guards(bug, raises=42)", "raises=42 is not an exception type (got int 42)"),
    ("guards(bug, raises='nosuchpkg.errors.Oops')", "raises='nosuchpkg.errors.Oops': no module "
     "named 'nosuchpkg'"),
    ("guards(bug, raises='os.NoSuchError')", "raises='os.NoSuchError': 'os' has no attribute "
     "'NoSuchError'"),
    ("guards(bug, raises='os.path')", "raises='os.path' is not an exception type (got module "
     "<module *>)"),
    ("guards(bug, raises='Oops')", "raises='Oops' is not a built-in exception; name another as "
     "'package.module.Name'"),
    ("guards(bug, raises='not a path')", "raises='not a path' is not an exception type nor a "
     "dotted path 'package.module.Name'"),
    ("guards(42, raises=ValueError)", "bug=42 is neither a context manager (or a callable "
     "returning one), a fixture name, nor a dotted path 'package.module:name'"),
    ("guards('no_such_fixture', raises=ValueError)", "bug='no_such_fixture' names no fixture "
     "visible to this test (a dotted path is 'package.module:name')"),
    ("guards(bug, raises=ValueError, match='(')", "match='(' is not a regular expression "
     "(missing ), unterminated subpattern at position 0)"),
    ("guards(bug, raises=ValueError, masked_by=42)", "masked_by=42 is neither a callable nor a "
     "dotted path 'package.module:name'"),
    ("guards(bug, raises=ValueError, exc=ValueError)", "unknown argument(s) exc; expected "
     "guards(bug, raises=EXC, match=None, masked_by=None)"),
    ("guards(bug, bug, raises=ValueError)", "expected guards(bug, raises=EXC, match=None, "
     "masked_by=None), got Mark(name='guards', *)"),
]


@pytest.mark.parametrize(("mark", "said"), BAD, ids=[m for m, _ in BAD])
def test_a_bad_guards_marker_is_a_collection_error_naming_it(
    pytester: pytest.Pytester, mark: str, said: str
) -> None:
    pytester.makepyfile(test_bad=HEADER + f"@pytest.mark.{mark}\ndef test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--cold-compile-prove",
                                          "--collect-only")
    result.stdout.fnmatch_lines([
        "*ERROR collecting test_bad.py*",
        f"guards marker of test_bad.py::test_x: {said}",
    ])
    assert result.ret == pytest.ExitCode.INTERRUPTED  # collection errors stop the session


def test_good_markers_of_every_form_collect_their_proof_items(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_good=HEADER + '''
@pytest.mark.guards(bug, raises=ValueError)
def test_factory():
    pass


@pytest.mark.guards(bug(), raises=(ValueError, "KeyError"), match="x")
def test_instance():
    pass


@pytest.mark.guards("bug_fixture", raises="os.error")
def test_fixture():
    pass


@pytest.mark.guards("somewhere.not_imported:bug", raises="pytest.fail.Exception")
@pytest.mark.parametrize("n", [1, 2])
def test_path(n):
    pass
''')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--cold-compile-prove",
                                          "--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "test_good.py::test_factory",
        "test_good.py::test_factory[[]prove[]]",
        "test_good.py::test_instance",
        "test_good.py::test_instance[[]prove[]]",
        "test_good.py::test_fixture",
        "test_good.py::test_fixture[[]prove[]]",
        "test_good.py::test_path[[]1[]]",
        "test_good.py::test_path[[]1-prove[]]",
        "test_good.py::test_path[[]2[]]",
        "test_good.py::test_path[[]2-prove[]]",
        "10 tests collected*",
    ])


def test_the_ini_key_turns_proving_on_and_a_bad_value_names_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ini=HEADER + '''
@pytest.mark.guards(bug, raises=ValueError)
def test_x():
    pass
''')
    pytester.makeini("[pytest]\ncold_compile_prove = true\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_ini.py::test_x", "test_ini.py::test_x[[]prove[]]"])

    pytester.makeini("[pytest]\ncold_compile_prove = perhaps\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "-q")
    result.stderr.fnmatch_lines(["ERROR: ini cold_compile_prove: expected true or false*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR

    pytester.makeini("[pytest]\n")
    help_text = pytester.runpytest_inprocess("--help").stdout.str()
    assert "--cold-compile-prove" in help_text and "cold_compile_prove" in help_text
