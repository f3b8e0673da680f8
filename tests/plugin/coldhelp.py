"""Helpers for the plugin's pytester tests: subprocess runs, fake selector distributions.

Entry-point selectors load only when their module is imported, so gridpair's (installed with
this distribution) stays out of these runs unless a test imports gridpair.
"""

from __future__ import annotations

import os
import sys
import textwrap

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
