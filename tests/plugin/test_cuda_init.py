"""Who initialized CUDA in the pytest process, named where auto's choice of mode is explained.

On the CPU: a fake libcuda.so.1 (gcc; cuInit keeps a flag, as the driver does) stands for the
driver, and a fake ``torch`` package whose ``torch.cuda._lazy_init`` calls its cuInit stands
for torch (the plugin hooks the function by name, as it would torch's own). The real torch
path runs only where a GPU is (``requires_cuda``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from coldhelp import conftest, modules_importable_by_name, needs_fork, run

pytestmark = needs_fork
needs_gcc = pytest.mark.skipif(not os.path.exists("/usr/bin/gcc"), reason="needs gcc")

FAKE_LIBCUDA = r"""
static int initialized = 0;
int cuInit(unsigned int flags) { (void)flags; initialized = 1; return 0; }
int cuDeviceGetCount(int *count) {
    if (!initialized) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    *count = 0;
    return 0;
}
"""

FAKE_TORCH_CUDA = """
import ctypes, os
_initialized = False

def is_initialized():
    return _initialized

def _lazy_init():
    global _initialized
    if _initialized:
        return
    assert ctypes.CDLL(os.environ["FAKE_LIBCUDA"]).cuInit(0) == 0
    _initialized = True

def current_device():
    _lazy_init()
    return 0
"""

COLD_TEST = "import pytest\n@pytest.mark.cold_compile\ndef test_cold():\n    pass\n"


def _fake_libcuda(directory: Path) -> str:
    (directory / "fakecuda.c").write_text(FAKE_LIBCUDA)
    lib = directory / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(lib),
                    str(directory / "fakecuda.c")], check=True)
    return str(lib)


def _reason(pytester: pytest.Pytester) -> str:
    (record,) = json.loads((pytester.path / "cold.json").read_text()).values()
    return str(record["mode_reason"])


@needs_gcc
def test_a_conftest_that_initializes_the_driver_directly_is_named(
    pytester: pytest.Pytester,
) -> None:
    lib = _fake_libcuda(pytester.path)
    pytester.makeconftest(conftest(f"import ctypes\nassert ctypes.CDLL({lib!r}).cuInit(0) == 0\n"))
    pytester.makepyfile(COLD_TEST)
    # Every test cold: the header, printed before collection, names who initialized CUDA.
    result = run(pytester, "--cold-compile", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=1)
    said = (f"the CUDA driver was initialized outside torch (libcuda {lib}; no CUDA library or "
            "module known to this plugin is loaded: a direct ctypes/cffi load of libcuda?), "
            f"while importing {pytester.path / 'conftest.py'}")
    out = result.stdout.str()
    # header (before collection), the engine's line, the summary, the JSON report
    assert f"cold-compile: {said}" in out.split("collected")[0]
    assert re.search(r"cold-compile: zygote \(auto: .*; " + re.escape(said) + r"\)", out)
    assert "1 run as zygote (auto: the pytest process initialized the CUDA driver" in out
    assert _reason(pytester).endswith("; " + said)


@needs_gcc
def test_a_test_module_that_initializes_the_driver_at_collection_is_named(
    pytester: pytest.Pytester,
) -> None:
    lib = _fake_libcuda(pytester.path)
    pytester.makepyfile(
        test_cudaearly=f"import ctypes\nassert ctypes.CDLL({lib!r}).cuInit(0) == 0\n" + COLD_TEST,
        test_plain=COLD_TEST,
    )
    result = run(pytester, "--cold-compile-report=cold.json", "test_plain.py",
                 "test_cudaearly.py")
    result.assert_outcomes(passed=2)
    reasons = json.loads((pytester.path / "cold.json").read_text())
    for reason in (r["mode_reason"] for r in reasons.values()):
        assert reason.endswith(", while collecting test_cudaearly.py"), reason


@needs_gcc
def test_torch_lazy_init_names_the_users_file_and_line_with_its_stack(
    pytester: pytest.Pytester,
) -> None:
    lib = _fake_libcuda(pytester.path)
    pytester._monkeypatch.setenv("FAKE_LIBCUDA", lib)
    torch = pytester.path / "torch"
    (torch / "cuda").mkdir(parents=True)
    (torch / "__init__.py").write_text("from . import cuda\n")
    (torch / "cuda" / "__init__.py").write_text(FAKE_TORCH_CUDA)
    modules_importable_by_name(pytester)  # this fake torch, not the installed one
    pytester.makeini("[pytest]\ncold_compile_preload = json\n")
    pytester.makeconftest(conftest(
        "import torch\n"
        "\n"
        "def pick_device():\n"
        "    return torch.cuda.current_device()\n"
        "\n"
        "pick_device()\n"
    ))
    pytester.makepyfile(COLD_TEST)
    result = run(pytester, "--cold-compile", "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=1)
    where = f"{pytester.path / 'conftest.py'}:4 (in pick_device)"
    said = f"CUDA first initialized by torch.cuda._lazy_init, called from {where}"
    assert said in _reason(pytester)
    assert _reason(pytester).startswith("auto: the pytest process initialized the CUDA driver")
    out = result.stdout.str()
    assert f"cold-compile: {said}" in out.split("collected")[0]  # the header
    summary = out.split("cold compile summary")[1]
    assert f"cold-compile: {said}" in summary
    assert "conftest.py\", line 6, in <module>" in summary  # the stack, outermost first
    assert "conftest.py\", line 4, in pick_device" in summary


@needs_gcc
def test_nothing_is_said_when_cuda_was_not_initialized(pytester: pytest.Pytester) -> None:
    lib = _fake_libcuda(pytester.path)
    pytester.makeconftest(conftest(f"import ctypes\nctypes.CDLL({lib!r})\n"))  # mapped only
    pytester.makepyfile(COLD_TEST)
    result = run(pytester, "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=1)
    assert _reason(pytester) == (
        "auto: the pytest process has not initialized the CUDA driver, forking is safe")
    result.stdout.no_fnmatch_line("*initialized outside torch*")


@pytest.mark.requires_cuda
def test_real_torch_initializing_cuda_in_a_conftest_is_named(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(conftest(
        "import torch\n"
        "\n"
        "DEVICE = torch.zeros(1, device='cuda').device\n"
    ))
    pytester.makepyfile(COLD_TEST)
    result = run(pytester, "--cold-compile-report=cold.json")
    result.assert_outcomes(passed=1)
    reason = _reason(pytester)
    assert "CUDA first initialized by torch.cuda._lazy_init, called from " \
        f"{pytester.path / 'conftest.py'}:3 (in <module>)" in reason, reason
