"""Cold children's caches: every kernel artifact private to its test, Inductor's precompiled C++
header and its vector-ISA verdicts shared by the children of one session."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_coldcompile.child import host_modules, pristine

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
import json, os, sys
from pathlib import Path
import torch
from pytest_coldcompile.child import host_modules, pristine
test_dir = sys.argv[1]
os.environ.update(pristine.child_environ(test_dir, {}, {}))
caches = Path(test_dir, "caches")
pristine.make_private(str(caches))
import torch._inductor.codecache as codecache
from torch._inductor import cpu_vec_isa
builds = bool(cpu_vec_isa.VecAVX2())  # one ISA's check (pick_vec_isa checks each in turn)
probes = sorted(str(p.relative_to(caches / "inductor")) for p in caches.rglob("*")
                if p.suffix in (".so", ".cpp"))
print(json.dumps({"header_dir": codecache._HEADER_DIR, "builds": builds, "probes": probes}))
sys.stdout.flush()
torch.compile(lambda x: x + 1)(torch.randn(8))
"""


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def _kernels(root: Path) -> set[Path]:
    """The libraries under root that are not an ISA probe (whose source defines a
    ``*_chk_kernel``): the compiled kernels."""
    def probe(library: Path) -> bool:
        source = library.with_suffix(".cpp")
        return source.exists() and "_chk_kernel" in source.read_text()

    return {p for p in _files(root) if p.suffix == ".so" and not probe(root / p)}


@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")), reason="needs a C++ compiler")
def test_the_header_and_the_vector_isa_checks_are_made_once_per_session_and_kernels_stay_private(
    tmp_path,
):
    """Two children of one session, each checking one vector ISA and then compiling a kernel.

    The header: built by the first child, reused (not rebuilt) by the second; every kernel is
    the child's own. The vector ISAs: Inductor decides which ones the machine's compiler can
    build and load by compiling and loading a probe library for each, in the cache: a fact of
    the machine, not of a kernel. The first child checks; the next one takes its verdict (the
    same one, whichever it is) and builds no probe."""
    shared = Path(pristine.shared_header_dir(tmp_path / "00001"))
    env = {k: v for k, v in os.environ.items()
           if k not in (pristine.HEADER_DIR_ENV, "TORCHINDUCTOR_VEC_ISA_OK")}
    env.update(PYTHONPATH=str(ROOT), TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS="1")
    seen, said, kernels = [], [], []
    for name in ("00001", "00002"):
        test_dir = tmp_path / name
        test_dir.mkdir()
        run = subprocess.run([sys.executable, "-c", _CHILD, str(test_dir)], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        said.append(json.loads(run.stdout.splitlines()[0]))
        assert Path(said[-1]["header_dir"]) == shared
        seen.append({p: (shared / p).stat().st_mtime_ns for p in _files(shared)
                     if p.suffix == ".gch"})
        kernels.append(_kernels(test_dir / "caches" / "inductor"))
    assert said[0]["builds"] == said[1]["builds"]
    assert said[0]["probes"], "the first child built (or tried to build) the probe itself"
    assert said[1]["probes"] == [], "the second child took the session's verdicts"
    assert all(kernels), kernels  # each child's own kernel, in its private cache
    assert len(seen[0]) == 1  # built by the first child...
    assert seen[1] == seen[0]  # ...and reused, not rebuilt, by the second
    # Nothing but headers and their locks in the shared directory, the vector-ISA verdicts,
    # and (where Triton's driver was loaded: a GPU machine) its host code: no kernel, no probe.
    assert {p.suffix for p in _files(shared)
            if p.parts[0] not in (pristine.VEC_ISA_DIR, host_modules.HOST_MODULE_DIR)} <= {
        ".h", ".gch", ".lock"}
    host = _files(shared / host_modules.HOST_MODULE_DIR)
    assert {p.name.split(".")[0] for p in host} <= {"cuda_utils", "hip_utils"}, host
    verdicts = _files(shared / pristine.VEC_ISA_DIR)
    assert verdicts and {p.suffix for p in verdicts} == {".json"}


def test_a_warm_up_that_cannot_import_the_stack_says_so(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(pristine, "COMPILE_STACK", ("torch._dynamo", "no_such_module_here"))
    assert pristine.warm_compile_stack() is False
    monkeypatch.setattr(pristine, "COMPILE_STACK", ("torch._dynamo",))
    assert pristine.warm_compile_stack() is True
