"""First-use imports are shared by the fork server: an installed module one cold child imported
is already imported in the next ones, as in a later in-process test; the project's own modules
and torch's compile stack never are."""

from __future__ import annotations

import json
import sys
import sysconfig
import types
from pathlib import Path

import pytest
from coldhelp import LIGHT_PRELOAD, needs_fork, run

from pytest_coldcompile.child import shared_imports

TESTS = """
import sys


def test_first_imports():
    assert "mailbox" not in sys.modules and "local_helper" not in sys.modules
    import local_helper  # noqa: F401
    import mailbox  # noqa: F401


def test_later_finds_installed_modules_imported():
    assert "mailbox" in sys.modules


def test_later_finds_the_projects_own_code_cold():
    assert "local_helper" not in sys.modules
"""


@needs_fork
@pytest.mark.parametrize("mode", ["in-process", "fork", "zygote"])
def test_an_installed_module_a_child_imported_is_shared(
    pytester: pytest.Pytester, mode: str
) -> None:
    pytester.makepyfile(test_first=TESTS, local_helper="VALUE = 1\n")
    cold = [] if mode == "in-process" else ["--cold-compile", f"--cold-compile-mode={mode}"]
    result = run(pytester, *LIGHT_PRELOAD, *cold)
    if cold:
        result.assert_outcomes(passed=3)
    else:  # in-process the project's module stays imported too: a side effect of test one
        result.assert_outcomes(passed=2, failed=1)


def _fake(monkeypatch: pytest.MonkeyPatch, name: str, path: str) -> None:
    module = types.ModuleType(name)
    module.__file__ = path
    monkeypatch.setitem(sys.modules, name, module)


def test_the_list_stops_at_the_compile_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a child imported after torch's compile stack may have been imported by it: the
    server, whose Inductor cache directory is the user's, would import it too."""
    # This process stands for a child that never initialized CUDA; under xdist on a GPU
    # machine an earlier test in this worker did, and the list would rightly be empty.
    monkeypatch.setattr(shared_imports.cuda, "cuda_driver_initialized", lambda: False)
    stdlib = sysconfig.get_paths()["stdlib"]
    before = set(sys.modules)
    _fake(monkeypatch, "coldfake_first", f"{stdlib}/coldfake_first.py")
    _fake(monkeypatch, "coldfake_project", str(tmp_path / "coldfake_project.py"))
    _fake(monkeypatch, "torch._dynamo.coldfake", f"{stdlib}/coldfake_dynamo.py")
    _fake(monkeypatch, "coldfake_after", f"{stdlib}/coldfake_after.py")
    shared_imports.write_imported(str(tmp_path), before)
    written = json.loads((tmp_path / shared_imports.IMPORTED).read_text())
    assert written == ["coldfake_first"]
    assert shared_imports.read_imported(str(tmp_path)) == ["coldfake_first"]


def test_a_child_that_initialized_cuda_shares_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One of its imports may have initialized the driver; a server importing it could not fork
    a usable child again."""
    stdlib = sysconfig.get_paths()["stdlib"]
    before = set(sys.modules)
    _fake(monkeypatch, "coldfake_asks_the_device", f"{stdlib}/coldfake_asks_the_device.py")
    monkeypatch.setattr(shared_imports.cuda, "cuda_driver_initialized", lambda: True)
    shared_imports.write_imported(str(tmp_path), before)
    assert not (tmp_path / shared_imports.IMPORTED).exists()
    monkeypatch.setattr(shared_imports.cuda, "cuda_driver_initialized", lambda: False)
    shared_imports.write_imported(str(tmp_path), before)
    assert shared_imports.read_imported(str(tmp_path)) == ["coldfake_asks_the_device"]


def test_a_child_that_imported_nothing_asks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Most tests import nothing new: the child then neither asks whether CUDA is initialized
    nor walks every module it holds (each one touched copies a page the server shares)."""
    asked = []
    monkeypatch.setattr(shared_imports.cuda, "cuda_driver_initialized",
                        lambda: asked.append(1) or False)
    before = shared_imports.modules_now()
    shared_imports.write_imported(str(tmp_path), before)
    assert asked == [] and not (tmp_path / shared_imports.IMPORTED).exists()
    stdlib = sysconfig.get_paths()["stdlib"]
    _fake(monkeypatch, "coldfake_imported_later", f"{stdlib}/coldfake_imported_later.py")
    shared_imports.write_imported(str(tmp_path), before)
    assert asked == [1]
    assert shared_imports.read_imported(str(tmp_path)) == ["coldfake_imported_later"]
