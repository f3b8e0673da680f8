"""Packaging: the lean install (pytest alone) runs cold tests; unsupported versions are refused.

The lean check builds a venv without torch, installs the project without extras from the
package index, and runs `pytest --help` and a tiny downstream suite cold there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest
from coldhelp import run_inprocess

from pytest_coldcompile import versions

ROOT = Path(__file__).resolve().parents[2]

# The command line of the contract: options and ini keys `pytest --help` must list.
OPTIONS = [
    "--cold-compile",
    "--cold-compile-mode",
    "--cold-compile-timeout",
    "--smem-limit",
    "--cold-compile-report",
]
INI_KEYS = ["cold_compile", "cold_compile_mode", "cold_compile_timeout", "smem_limit"]

# What only the extras may bring: none of it may come with a plain install.
HEAVY = {"torch", "triton", "numpy", "pytest-xdist", "pytest-forked"}

DOWNSTREAM_TESTS = """
import sys

import pytest


def test_trivial(cold_state):
    assert cold_state.cold and cold_state.mode in ("fork", "spawn")
    assert "torch" not in sys.modules


@pytest.mark.cold_compile(timeout=60)
@pytest.mark.smem_limit(101376)
def test_marked(cold_state, launch_events):
    assert cold_state.smem_limit == 101376
    assert len(launch_events) == 0


@pytest.mark.requires_cuda
def test_needs_cuda():
    pass


@pytest.mark.requires_smem(232448)
def test_needs_smem():
    pass
"""


def _python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def _pip(python: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def lean_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the project installed without extras: pytest and what pytest needs."""
    base = tmp_path_factory.mktemp("lean")
    # Build from a copy: an in-tree build would write build/ and egg-info into the checkout.
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for package in ("pytest_coldcompile", "gridpair"):
        shutil.copytree(
            ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    python = _python(env_dir)
    installed = _pip(python, "install", str(src))
    if installed.returncode != 0:
        reachable = _pip(python, "download", "--no-deps", "-d", str(base / "probe"), "pytest>=8")
        if reachable.returncode != 0:
            pytest.skip("no package index reachable: cannot install pytest into a fresh venv")
        pytest.fail(f"pip install of the project failed:\n{installed.stdout}\n{installed.stderr}")
    return env_dir


def test_a_plain_install_brings_pytest_alone(lean_env: Path) -> None:
    listed = _pip(_python(lean_env), "list", "--format=freeze")
    assert listed.returncode == 0, listed.stderr
    names = {line.split("==")[0].lower() for line in listed.stdout.split()}
    assert "pytest-coldcompile" in names and "pytest" in names
    assert names.isdisjoint(HEAVY), f"a plain install pulled {sorted(names & HEAVY)}"


def test_pytest_help_lists_every_option_without_torch(lean_env: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(_python(lean_env)), "-m", "pytest", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    missing = [
        o for o in OPTIONS if not re.search(rf"^\s+{re.escape(o)}\b", result.stdout, re.M)
    ]
    missing += [k for k in INI_KEYS if not re.search(rf"^\s+{k} \(", result.stdout, re.M)]
    assert missing == [], f"pytest --help lacks {missing}"


def test_a_downstream_suite_runs_cold_without_torch(lean_env: Path, tmp_path: Path) -> None:
    (tmp_path / "test_downstream.py").write_text(textwrap.dedent(DOWNSTREAM_TESTS))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    result = subprocess.run(
        [str(_python(lean_env)), "-m", "pytest", "--cold-compile", "-p", "no:cacheprovider",
         "-rs"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert re.search(r"\b2 passed, 2 skipped\b", out), out
    no_torch = subprocess.run(
        [str(_python(lean_env)), "-c", "import torch"], capture_output=True, timeout=60
    )
    assert no_torch.returncode != 0, "torch is importable in the lean venv: the check proves less"


def test_no_plugin_module_imports_torch_or_triton(tmp_path: Path) -> None:
    package = ROOT / "pytest_coldcompile"
    modules = sorted(
        ".".join(("pytest_coldcompile", *p.relative_to(package).with_suffix("").parts))
        for p in package.rglob("*.py")
        if p.stem != "__init__"
    )
    assert len(modules) > 20, modules
    result = _run_python(
        f"""
        import importlib, sys
        for name in {modules!r}:
            importlib.import_module(name)
        print(sorted(m for m in ("torch", "triton", "numpy", "gridpair") if m in sys.modules))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == "[]", result.stdout


# -- versions -------------------------------------------------------------------------------


def _declared(name: str) -> str:
    """The requirement pyproject.toml declares for `name` (the contract users install by), such
    as 'torch>=2.11,<2.15': the oracle for what versions.py refuses and says."""
    text = (ROOT / "pyproject.toml").read_text()
    found = re.findall(rf'"({name}>=[\d.]+,<[\d.]+)\s*[;"]', text)
    assert len(found) == 1, f"pyproject.toml declares {name} {len(found)} times: {found}"
    return found[0]


@pytest.mark.parametrize(
    ("name", "version", "ok"),
    [
        ("pytest", "8.0.0", True),
        ("pytest", "8", True),
        ("pytest", "9.2.0", True),
        ("pytest", "7.4.4", False),
        ("pytest", "10.0.0rc1", False),
        ("torch", "2.11.0", True),
        ("torch", "2.13.0+cpu", True),
        ("torch", "2.14.9", True),
        ("torch", "2.10.1", False),
        ("torch", "2.15.0", False),
        ("torch", "2.15.0a0+git123", False),
        ("triton", "3.6.0", True),
        ("triton", "3.7.99", True),
        ("triton", "3.5.1", False),
        ("triton", "3.8.0", False),
    ],
)
def test_supported_ranges(name: str, version: str, ok: bool) -> None:
    message = versions.unsupported(name, version)
    assert (message is None) == ok
    if not ok:
        assert f"supports {_declared(name)}; this is {name} {version}" in message


def test_version_check_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="name: expected one of pytest, torch, triton"):
        versions.unsupported("numpy", "2.0")
    with pytest.raises(ValueError, match="version: expected a version string"):
        versions.unsupported("torch", "nightly")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib needs Python 3.11")
def test_pyproject_bounds_are_the_checked_ones() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["gridpair"]]
    for name, (low, high) in versions.SUPPORTED.items():
        spec = next(r for r in requirements if re.match(rf"{name}\b", r))
        assert spec.split(";")[0].strip() == f"{name}>={low},<{high}"


def _run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Autoload off: `-p pytest_coldcompile.plugin` loads the plugin, installed or not.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(cwd)]),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def test_an_unsupported_pytest_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    result = _run_python(
        """
        import pytest
        pytest.__version__ = "10.0.0"  # what the check reads
        raise SystemExit(pytest.main(["-p", "pytest_coldcompile.plugin", "-p",
                                      "no:cacheprovider", "test_x.py"]))
        """,
        tmp_path,
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "supports pytest>=8,<10; this is pytest 10.0.0" in result.stderr


@pytest.mark.parametrize(("name", "version"), [("torch", "2.10.0"), ("triton", "3.8.0")])
def test_gridpair_refuses_an_unsupported_release_at_import(
    tmp_path: Path, name: str, version: str
) -> None:
    pytest.importorskip(name)
    result = _run_python(
        f"""
        import {name}
        {name}.__version__ = {version!r}  # what the check reads
        import gridpair
        """,
        tmp_path,
    )
    assert result.returncode != 0
    assert "ImportError: " in result.stderr, result.stderr
    assert f"supports {_declared(name)}; this is {name} {version}" in result.stderr, result.stderr


def test_naming_the_plugin_module_where_it_is_installed_is_harmless(
    pytester: pytest.Pytester,
) -> None:
    import importlib.metadata

    names = {ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    if "pytest_coldcompile.plugin" not in names:
        pytest.skip("the distribution is not installed here: no entry point to collide with")
    pytester.makepyfile("def test_fixture_works(cold_state):\n    assert not cold_state.cold\n")
    result = run_inprocess(pytester, "-p", "pytest_coldcompile.plugin")
    result.assert_outcomes(passed=1)
    assert "already registered" not in result.stderr.str()
