"""Helpers for the plugin's pytester tests: subprocess and in-process runs, fake selectors.

Two tiers: `run` starts a pytest subprocess, for whatever is about processes (cold children,
crashes, signals, timeouts); `run_inprocess` runs pytest in this process, for the rest
(options, markers, help, reports of runs with no cold test). Entry-point selectors load only
when their module is imported, so gridpair's stays out of these runs unless a test imports it.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest


def needs_modules(*names: str) -> pytest.MarkDecorator:
    """Skip unless every module is installed, without importing any in this process: pytester
    restores sys.modules after each test, so a torch imported inside one is imported again by
    the next, which crashes the interpreter."""
    import importlib.util

    missing = [name for name in names if importlib.util.find_spec(name) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


def conftest(extra: str = "") -> str:
    return textwrap.dedent(extra)


def run(pytester: pytest.Pytester, *args: str, timeout: float = 240) -> pytest.RunResult:
    """A pytest subprocess: isolation must be tested where fork and signals are real."""
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=timeout)


# Modules an in-process run must not import: pytester drops what a run imported, and a second
# import of either in one interpreter fails (torch crashes; triton's extension is gone).
NOT_TWICE = ("torch", "triton")


class _ImportGuard:
    """Notes which of NOT_TWICE an in-process run imported, before pytester forgets them."""

    def __init__(self) -> None:
        self.before = {name for name in NOT_TWICE if name in sys.modules}
        self.imported: list[str] = []

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        self.imported = [n for n in NOT_TWICE if n in sys.modules and n not in self.before]


def inprocess_basetemp(pytester: pytest.Pytester) -> Path:
    """An in-process run's basetemp (as pytester.runpytest gives it): never the default one,
    which this session's own tmp_path lives beside and whose old entries pytest removes."""
    return pytester.path.parent / "basetemp"


def run_inprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in this process, for runs where no process behaviour is under test: nothing
    runs cold, crashes or times out, and nothing imports torch or triton (checked)."""
    guard = _ImportGuard()
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", f"--basetemp={inprocess_basetemp(pytester)}", *args,
        plugins=[guard],
    )
    assert not guard.imported, (
        f"this in-process run imported {', '.join(guard.imported)}: use coldhelp.run"
    )
    return result


def fresh_selector_registry(pytester: pytest.Pytester) -> None:
    """The selector registry as a new pytest process has it, for an in-process run, until the
    test ends: nothing registered or loaded, and the entry points listed again with the test
    directory (where fake_distribution writes) on sys.path, less those whose module this
    process imported already (a new process has imported none)."""
    import importlib.metadata

    from pytest_coldcompile import ENTRY_POINT_GROUP, import_hooks, selectors

    pytester.syspathinsert()
    listed = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    patch = pytester._monkeypatch
    patch.setattr(selectors, "_entry_points", [ep for ep in listed if ep.module not in sys.modules])
    for name, empty in [("_registered", []), ("_loaded", {}), ("_on_load", []),
                        ("_watched", set())]:
        patch.setattr(selectors, name, empty)
    patch.setattr(import_hooks, "_hooks", {})


def fake_distribution(pytester: pytest.Pytester, name: str, entry_points: dict[str, str]) -> None:
    """A dist-info on the run's sys.path (its rootdir) declaring selector entry points."""
    info = pytester.path / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[pytest_coldcompile.selectors]\n{lines}\n")


def modules_importable_by_name(pytester: pytest.Pytester) -> None:
    """Put the test directory first on the run's PYTHONPATH (for ``-p module``, which pytest
    imports before it reads conftests), keeping what is there: where the project is not
    installed, it is how pytest_coldcompile itself is found."""
    paths = [str(pytester.path), os.environ.get("PYTHONPATH", "")]
    pytester._monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))


# Before its first child a zygote imports cold_compile_preload: by default, and when the value is
# empty, torch and triton (about 3 s on two cores). A run whose tests never import either has
# it preload a module pytest imported already: the zygote still preloads, forks and serves each
# child as it does with torch. Preloading torch itself is tests/plugin/test_zygote.py's concern,
# and the zygote runs whose tests import torch keep the default.
LIGHT_PRELOAD = ("-o", "cold_compile_preload=json")


needs_fork = pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def timed_out_lines(seconds: int) -> list[str]:
    """What a test killed by --cold-compile-timeout=seconds reports, in order (its body
    printed "waiting forever" before it hung)."""
    return [
        f"*: timeout: the cold child ran longer than {seconds} s (--cold-compile-timeout); "
        "its process group was killed",
        "*Captured stdout call*",
        "waiting forever",
    ]
