"""Cold children's caches: every kernel artifact private to its test, Inductor's precompiled C++
header shared by the children of one session."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_coldcompile.child import pristine

ROOT = Path(__file__).resolve().parents[2]


def test_children_of_a_session_share_the_header_directory_and_no_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(pristine.HEADER_DIR_ENV, raising=False)
    first, second = (pristine.cache_env(tmp_path / name) for name in ("00001", "00002"))
    assert first[pristine.HEADER_DIR_ENV] == second[pristine.HEADER_DIR_ENV]
    assert Path(first[pristine.HEADER_DIR_ENV]).parent == tmp_path.resolve()
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_HOME"):
        assert first[name] != second[name]
        assert Path(first[name]).is_relative_to(tmp_path / "00001")
        assert not Path(first[name]).is_relative_to(first[pristine.HEADER_DIR_ENV])


def test_a_header_directory_of_the_users_own_is_kept(tmp_path, monkeypatch):
    own = tmp_path / "headers"
    monkeypatch.setenv(pristine.HEADER_DIR_ENV, str(own))
    env = pristine.cache_env(tmp_path / "00001")
    assert env[pristine.HEADER_DIR_ENV] == str(own)
    assert Path(env["TORCHINDUCTOR_CACHE_DIR"]).is_relative_to(tmp_path / "00001")


_CHILD = """
import os, sys, torch
from pytest_coldcompile.child import pristine
test_dir = sys.argv[1]
os.environ.update(pristine.child_environ(test_dir, {}, {}))
pristine.make_private(os.path.join(test_dir, "caches"))
import torch._inductor.codecache as codecache
print(codecache._HEADER_DIR)
torch.compile(lambda x: x + 1)(torch.randn(8))
"""


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")), reason="needs a C++ compiler")
def test_the_header_is_built_once_per_session_and_kernels_stay_private(tmp_path):
    shared = Path(pristine.shared_header_dir(tmp_path / "00001"))
    env = {k: v for k, v in os.environ.items() if k != pristine.HEADER_DIR_ENV}
    # VEC_ISA_OK: Inductor trusts the CPU's flags instead of building and loading a probe .so
    # in every child (about 4 s each); the kernel is built with the same flags. It also leaves
    # the kernel as the only .so in a child's cache, so the kernel assert below cannot pass on
    # the probe's library.
    env.update(PYTHONPATH=str(ROOT), TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS="1",
               TORCHINDUCTOR_VEC_ISA_OK="1")
    seen = []
    for name in ("00001", "00002"):
        test_dir = tmp_path / name
        test_dir.mkdir()
        run = subprocess.run([sys.executable, "-c", _CHILD, str(test_dir)], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        assert Path(run.stdout.split()[0]) == shared
        headers = {p: (shared / p).stat().st_mtime_ns for p in _files(shared)
                   if p.suffix == ".gch"}
        seen.append(headers)
        kernels = _files(test_dir / "caches" / "inductor")
        assert any(p.suffix == ".so" for p in kernels), kernels  # this child's own kernel
    assert len(seen[0]) == 1  # built by the first child...
    assert seen[1] == seen[0]  # ...and reused, not rebuilt, by the second
    # Nothing but headers and their locks in the shared directory, and the vector-ISA
    # verdicts (test_the_vector_isa_check_is_made_once_per_session): no kernel.
    assert {p.suffix for p in _files(shared) if p.parts[0] != pristine.VEC_ISA_DIR} <= {
        ".h", ".gch", ".lock"}
    assert {p.suffix for p in _files(shared / pristine.VEC_ISA_DIR)} <= {".json"}


def test_a_warm_up_that_cannot_import_the_stack_says_so(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(pristine, "COMPILE_STACK", ("torch._dynamo", "no_such_module_here"))
    assert pristine.warm_compile_stack() is False
    monkeypatch.setattr(pristine, "COMPILE_STACK", ("torch._dynamo",))
    assert pristine.warm_compile_stack() is True


_ISA_CHILD = """
import os, sys, time
from pytest_coldcompile.child import pristine
test_dir = sys.argv[1]
os.environ.update(pristine.child_environ(test_dir, {}, {}))
pristine.make_private(os.path.join(test_dir, "caches"))
from torch._inductor import cpu_vec_isa
start = time.perf_counter()
builds = bool(cpu_vec_isa.VecAVX2())  # one ISA's check (pick_vec_isa checks each in turn)
print(builds, round(time.perf_counter() - start, 2))
"""


@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")), reason="needs a C++ compiler")
def test_the_vector_isa_check_is_made_once_per_session(tmp_path):
    """Inductor decides which vector ISAs the machine's compiler can build and load by
    compiling and loading a probe library for each, in the cache: a fact of the machine, not
    of a kernel. The first child of a session checks; the next one takes its verdict (the same
    one, whichever it is) and builds no probe."""
    shared = Path(pristine.shared_header_dir(tmp_path / "00001"))
    env = {k: v for k, v in os.environ.items()
           if k not in (pristine.HEADER_DIR_ENV, "TORCHINDUCTOR_VEC_ISA_OK")}
    env["PYTHONPATH"] = str(ROOT)
    picked, probes = [], []
    for name in ("00001", "00002"):
        test_dir = tmp_path / name
        test_dir.mkdir()
        run = subprocess.run([sys.executable, "-c", _ISA_CHILD, str(test_dir)], env=env,
                             cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        picked.append(run.stdout.split()[0])
        probes.append({p for p in _files(test_dir / "caches" / "inductor")
                       if p.suffix in (".so", ".cpp")})
    assert picked[0] == picked[1]
    assert probes[0], "the first child built (or tried to build) the probe itself"
    assert probes[1] == set(), "the second child took the session's verdicts"
    verdicts = _files(shared / pristine.VEC_ISA_DIR)
    assert verdicts and {p.suffix for p in verdicts} == {".json"}
