"""gridpair's own version check: its bounds are those of pyproject.toml's [gridpair] extra, and an
unsupported torch or Triton is refused at ``import gridpair`` with a message naming gridpair."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from gridpair import _versions

ROOT = Path(__file__).resolve().parents[2]


def _extra_bounds() -> dict[str, tuple[str, str]]:
    """(lowest, first unsupported) of each versioned requirement of the [gridpair] extra, read
    from pyproject.toml itself (the packaging metadata pip installs from)."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    bounds = {}
    for line in project["optional-dependencies"]["gridpair"]:
        requirement = Requirement(line)
        specifiers = {spec.operator: spec.version for spec in requirement.specifier}
        if specifiers:
            bounds[requirement.name] = (specifiers[">="], specifiers["<"])
    return bounds


def test_the_checked_bounds_are_the_extras_bounds():
    assert _extra_bounds() == _versions.SUPPORTED


@pytest.mark.parametrize(("name", "version"), [("torch", "2.10.0"), ("triton", "3.8.0")])
def test_an_unsupported_release_is_refused_at_import_naming_gridpair(name, version, tmp_path):
    pytest.importorskip(name)
    low, high = _extra_bounds()[name]
    code = f"""
        import {name}
        {name}.__version__ = {version!r}  # what the check reads
        import gridpair
    """
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode != 0
    assert (f"ImportError: gridpair supports {name}>={low},<{high}; this is {name} {version}"
            in run.stderr), run.stderr


@pytest.mark.parametrize(("name", "version"), [("torch", "2.11.0"), ("torch", "2.14.9+cu128"),
                                               ("triton", "3.6.0"), ("triton", "3.7.1")])
def test_supported_releases_pass(name, version):
    assert _versions.unsupported(name, version) is None
