"""The zygote and the precise CUDA detection that decides when auto needs it.

The detector runs for real against a fake libcuda.so.1 built with gcc: exported cuInit and
cuDeviceGetCount keep an init flag, as the real driver does (CUDA_ERROR_NOT_INITIALIZED, 3,
before cuInit). The zygote itself needs no CUDA and runs for real here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from coldhelp import (
    conftest,
    modules_importable_by_name,
    needs_fork,
    needs_modules,
    run,
    run_inprocess,
)

pytestmark = needs_fork
needs_gcc = pytest.mark.skipif(not os.path.exists("/usr/bin/gcc"), reason="needs gcc")

FAKE_LIBCUDA = r"""
static int initialized = 0;
int cuInit(unsigned int flags) { (void)flags; initialized = 1; return 0; }
int cuDriverGetVersion(int *version) { *version = 12080; return 0; }
int cuDeviceGetCount(int *count) {
    if (!initialized) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    *count = 0;
    return 0;
}
"""


def _fake_libcuda(directory: Path) -> str:
    source = directory / "fakecuda.c"
    source.write_text(FAKE_LIBCUDA)
    lib = directory / "libcuda.so.1"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(lib), str(source)],
        check=True,
    )
    return str(lib)


DETECT = """
import ctypes, json, sys
from pytest_coldcompile.devices import cuda
steps = sys.argv[2:]
out = {"before": cuda.cuda_driver_initialized()}
if "load" in steps:
    lib = ctypes.CDLL(sys.argv[1])
    out["loaded"] = cuda.cuda_driver_loaded()
    out["mapped"] = cuda.cuda_driver_initialized()
if "init" in steps:
    assert lib.cuInit(0) == 0
    out["initialized"] = cuda.cuda_driver_initialized()
print(json.dumps(out))
"""


def _detect(lib: str, *steps: str) -> dict[str, bool]:
    proc = subprocess.run(
        [sys.executable, "-c", DETECT, lib, *steps], capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout)


@needs_gcc
def test_the_detector_tells_mapped_from_initialized(tmp_path: Path) -> None:
    lib = _fake_libcuda(tmp_path)
    assert _detect(lib) == {"before": False}
    assert _detect(lib, "load") == {"before": False, "loaded": True, "mapped": False}
    assert _detect(lib, "load", "init") == {
        "before": False,
        "loaded": True,
        "mapped": False,
        "initialized": True,
    }


def _cuda_conftest(pytester: pytest.Pytester, lib: str, init: bool) -> None:
    body = f"import ctypes\n_LIB = ctypes.CDLL({lib!r})\n"
    if init:
        body += "assert _LIB.cuInit(0) == 0\n"
    pytester.makeconftest(conftest(body))


@needs_gcc
def test_auto_forks_when_collection_mapped_but_did_not_initialize_cuda(
    pytester: pytest.Pytester,
) -> None:
    # What `import torch` does on a GPU machine: libcuda is mapped, cuInit never ran.
    _cuda_conftest(pytester, _fake_libcuda(pytester.path), init=False)
    pytester.makepyfile("def test_cold(cold_state):\n    assert cold_state.mode == 'fork'\n")
    result = run(pytester, "--cold-compile")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*cold-compile: fork (auto: *has not initialized the CUDA*"])


@needs_gcc
def test_fork_mode_warns_only_when_cuda_was_initialized(pytester: pytest.Pytester) -> None:
    lib = _fake_libcuda(pytester.path)
    pytester.makepyfile("def test_cold():\n    pass\n")
    _cuda_conftest(pytester, lib, init=False)
    clean = run(pytester, "--cold-compile", "--cold-compile-mode=fork")
    clean.assert_outcomes(passed=1)
    clean.stdout.no_fnmatch_line("*warning*")
    _cuda_conftest(pytester, lib, init=True)
    dirty = run(pytester, "--cold-compile", "--cold-compile-mode=fork")
    dirty.assert_outcomes(passed=1)
    dirty.stdout.fnmatch_lines(["*initialized the CUDA driver, forked children cannot use CUDA*"])


@needs_gcc
def test_auto_uses_the_zygote_when_collection_initialized_cuda(pytester: pytest.Pytester) -> None:
    _cuda_conftest(pytester, _fake_libcuda(pytester.path), init=True)
    pytester.makepyfile(
        """
        import pytest
        def test_in_process():
            pass
        @pytest.mark.cold_compile
        def test_cold(cold_state):
            assert cold_state.mode == "zygote"
        """
    )
    result = run(pytester, "--cold-compile-report=report.json")
    result.assert_outcomes(passed=2)
    reason = "auto: the pytest process initialized the CUDA driver during collection*"
    result.stdout.fnmatch_lines(
        [f"*cold-compile: zygote ({reason})", f"1 run as zygote ({reason})"]
    )
    entry = json.loads((pytester.path / "report.json").read_text())
    (record,) = entry.values()
    assert record["mode"] == "zygote"
    assert record["mode_reason"].startswith("auto: the pytest process initialized the CUDA")


PRELOADED = """
import os
with open(os.path.join(os.path.dirname(__file__), "imported-by.txt"), "a") as f:
    f.write(f"{os.getpid()}\\n")
"""

ZYGOTE_TESTS = """
import json, os, sys, pytest

def test_in_process():
    with open("parent.txt", "w") as f:
        f.write(str(os.getpid()))

@pytest.mark.cold_compile
@pytest.mark.parametrize("i", range(2))
def test_cold(i, cold_state):
    assert cold_state.mode == "zygote"
    assert "preloaded_probe" in sys.modules, "the zygote's preload"
    # The conftest ran in this child: the zygote was forked before the parent imported it.
    assert json.CONFTEST_PID == os.getpid()
    with open(f"child-{i}.txt", "w") as f:
        f.write(f"{os.getpid()} {os.getppid()}")
"""


def _zygote_project(cold: pytest.Pytester, mode: str) -> None:
    cold.makeini(f"[pytest]\ncold_compile_mode = {mode}\ncold_compile_preload = preloaded_probe\n")
    cold.makepyfile(preloaded_probe=PRELOADED, test_zygote_run=ZYGOTE_TESTS)
    cold.makeconftest(conftest("import json, os\njson.CONFTEST_PID = os.getpid()\n"))


def test_the_zygote_preloads_once_before_conftests_and_forks_each_test(
    cold: pytest.Pytester,
) -> None:
    _zygote_project(cold, "zygote")
    result = run(cold, "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["*zygote forked before collection; when used it preloads preloaded_probe*"]
    )
    parent = (cold.path / "parent.txt").read_text()
    children = [(cold.path / f"child-{i}.txt").read_text().split() for i in range(2)]
    importers = (cold.path / "imported-by.txt").read_text().split()
    assert len(importers) == 1, "imported once, by the zygote, and never again by a child"
    zygote = importers[0]
    assert zygote != parent
    assert {ppid for _, ppid in children} == {zygote}, "each child was forked by the zygote"
    assert len({pid for pid, _ in children}) == 2


def test_the_zygote_imports_nothing_when_auto_forks(cold: pytest.Pytester) -> None:
    # Marker-only run, CUDA clean: the post-collection fork server is chosen; the zygote,
    # forked early, was told not to preload before it imported anything.
    _zygote_project(cold, "auto")
    (cold.path / "test_zygote_run.py").write_text(
        "import os, pytest\n"
        "@pytest.mark.cold_compile\n"
        "def test_cold(cold_state):\n"
        "    assert cold_state.mode == 'fork'\n"
    )
    result = run(cold)
    result.assert_outcomes(passed=1)
    assert not (cold.path / "imported-by.txt").exists()


def test_a_preload_that_fails_to_import_does_not_stop_the_tests(cold: pytest.Pytester) -> None:
    cold.makeini("[pytest]\ncold_compile_preload = no_such_module_here\n")
    cold.makepyfile("def test_cold(cold_state):\n    assert cold_state.mode == 'zygote'\n")
    run(cold, "--cold-compile", "--cold-compile-mode=zygote").assert_outcomes(passed=1)


def test_a_bad_preload_name_is_a_usage_error_naming_the_key(cold: pytest.Pytester) -> None:
    cold.makeini("[pytest]\ncold_compile_preload = not a module\n")
    cold.makepyfile("def test_any():\n    pass\n")
    result = run_inprocess(cold, "--cold-compile")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*cold_compile_preload: 'not a module' is not a module name (list one module per line)*"]
    )


@needs_modules("torch")
def test_preloading_the_compile_stack_touches_no_default_cache(cold: pytest.Pytester) -> None:
    """Importing Dynamo creates Inductor's cache directory and writes its path into
    TORCHINDUCTOR_CACHE_DIR (torch._dynamo.package, at import). Preloaded by the zygote, it must
    not create the user's default one; its children still start with Dynamo imported, and with
    their own private caches."""
    cold.makeini("[pytest]\ncold_compile_preload =\n    torch\n    torch._dynamo\n")
    cold.makepyfile(
        """
        import os, sys

        def test_cold(cold_state):
            assert "torch._dynamo" in sys.modules, "preloaded by the zygote"
            assert os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith(cold_state.cache_dir)
        """
    )
    tmp = cold.path / "tmp"
    tmp.mkdir()
    cold._monkeypatch.setenv("TMPDIR", str(tmp))
    cold._monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    run(cold, "--cold-compile", "--cold-compile-mode=zygote").assert_outcomes(passed=1)
    assert [p.name for p in tmp.iterdir() if p.name.startswith("torchinductor")] == []
    assert [p.name for p in tmp.iterdir() if p.name.startswith("pytest-coldcompile-zygote")] == []


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_an_inline_run_stops_its_zygote(cold: pytest.Pytester) -> None:
    # In-process (pytester inline): the zygote is this process's child, and nothing but the
    # plugin's cleanup would end it.
    from pytest_coldcompile.devices import cuda

    if cuda.cuda_driver_initialized():  # an in-process GPU test ran before, on this worker
        pytest.skip("this process initialized CUDA: no zygote can be forked from it")
    cold.makepyfile(
        """
        import os, pytest
        @pytest.mark.cold_compile
        def test_cold(cold_state):
            assert cold_state.mode == "zygote"
            with open("zygote.pid", "w") as f:
                f.write(str(os.getppid()))
        """
    )
    cold.makeini("[pytest]\ncold_compile_preload = json\n")
    reprec = cold.inline_run("-p", "no:cacheprovider", "--cold-compile-mode=zygote")
    reprec.assertoutcome(passed=1)
    zygote = int((cold.path / "zygote.pid").read_text())
    assert zygote != os.getpid()
    assert _gone(zygote)


def _children() -> set[int]:
    """Live (not zombie) child processes of this process."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.add(int(entry))
    return found


def test_an_inline_run_without_cold_tests_stops_its_idle_zygote(cold: pytest.Pytester) -> None:
    # auto, no cold test: the zygote forked before collection is never used, and no engine
    # owns it; the config's cleanup must end it.
    cold.makepyfile("def test_plain():\n    pass\n")
    before = _children()
    reprec = cold.inline_run("-p", "no:cacheprovider")
    reprec.assertoutcome(passed=1)
    assert _children() - before == set()


NVML_PROBE = """
import os
AT_IMPORT = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")

def test_env():
    assert AT_IMPORT == {expected!r}
"""


def test_collection_probes_ask_nvml_unless_the_user_says_otherwise(cold: pytest.Pytester) -> None:
    # torch.cuda.is_available() reads this at each call: with "1" it asks NVML and leaves the
    # CUDA driver uninitialized, so a skipif at collection does not rule out forking.
    cold._monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    cold.makepyfile(NVML_PROBE.format(expected="1"))
    run(cold).assert_outcomes(passed=1)
    cold._monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "0")
    cold.makepyfile(NVML_PROBE.format(expected="0"))
    run(cold).assert_outcomes(passed=1)


def test_zygote_mode_spawns_and_says_why_when_no_zygote_could_start(
    pytester: pytest.Pytester,
) -> None:
    # Registered by a conftest, the plugin arrives after the initial conftests were loaded:
    # too late to fork a clean zygote.
    pytester.makeconftest(conftest('pytest_plugins = ["pytest_coldcompile.plugin"]\n'))
    pytester.makepyfile("def test_cold(cold_state):\n    assert cold_state.mode == 'spawn'\n")
    pytester._monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = run(pytester, "--cold-compile", "--cold-compile-mode=zygote")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*cold-compile: spawn (zygote: chosen by --cold-compile-mode, but no zygote was started*"]
    )


def test_zygote_mode_says_when_cuda_was_initialized_before_the_zygote_could_fork(
    pytester: pytest.Pytester,
) -> None:
    # Loaded with -p, before pytest_load_initial_conftests: the process reads as one whose
    # CUDA driver was initialized already (an earlier in-process run did it).
    pytester.makepyfile(
        cuda_was_initialized=(
            "from pytest_coldcompile.devices import cuda\n"
            "cuda.cuda_driver_initialized = lambda: True\n"
        )
    )
    pytester.makepyfile("def test_cold(cold_state):\n    assert cold_state.mode == 'spawn'\n")
    modules_importable_by_name(pytester)
    result = run(
        pytester, "-p", "cuda_was_initialized", "--cold-compile", "--cold-compile-mode=zygote"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*cold-compile: spawn (zygote: chosen by --cold-compile-mode, but no zygote was "
            "started (this process had initialized the CUDA driver before the zygote could "
            "fork); spawning)*"
        ]
    )


@pytest.mark.parametrize("answering", ["false", "true"])
def test_a_cold_run_on_a_gpu_machine_preloads_the_zygote_at_once_unless_queries_are_answered(
    cold: pytest.Pytester, answering: str
) -> None:
    # `auto` with --cold-compile where an NVIDIA driver exists and collection's device queries
    # go to the driver: the zygote imports while pytest collects, before the decision (here:
    # fork, CUDA is clean), not after it. Answered, collection rarely needs the zygote.
    _zygote_project(cold, "auto")
    (cold.path / "nvidiactl").touch()
    cold.makepyfile(
        fakedriver="import pytest_coldcompile.devices.cuda as d\n"
        f"d.NVIDIA_CONTROL = {str(cold.path / 'nvidiactl')!r}\n",
        test_zygote_run="def test_cold(cold_state):\n    assert cold_state.mode == 'fork'\n",
    )
    result = run(cold, "-p", "fakedriver", "--cold-compile",
                 "-o", f"cold_compile_answer_device_queries={answering}")
    result.assert_outcomes(passed=1)
    preloaded = (cold.path / "imported-by.txt").exists()
    assert preloaded == (answering == "false"), "the zygote preloads before the decision"


@pytest.mark.cold_compile
def test_a_pytest_run_inside_a_cold_test_is_an_ordinary_run(pytester: pytest.Pytester) -> None:
    # This test runs in a cold child; the run it starts in the same process has a config of
    # its own and must not take itself for that child.
    pytester.makepyfile(
        "def test_inner(cold_state):\n    assert not cold_state.cold and cold_state.mode is None\n"
    )
    pytester.inline_run("-p", "no:cacheprovider", "--cold-compile-mode=fork").assertoutcome(
        passed=1
    )
