"""Triton's host-side C modules (its driver's utilities) are built once per session: the next
cold children copy that build, and their own Triton caches stay private and as Triton leaves
them. A real build through ``triton.runtime.build``, with a compiler that notes each run."""

from __future__ import annotations

import shutil
import textwrap

import pytest
from coldhelp import needs_modules, run

SOURCE = """
#include <Python.h>
static PyObject* answer(PyObject* self, PyObject* args) { return PyLong_FromLong(ANSWER); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "host_probe", NULL, -1, methods};
PyMODINIT_FUNC PyInit_host_probe(void) { return PyModule_Create(&module); }
"""

TESTS = '''
import os
from pathlib import Path
import pytest
from triton.runtime.build import compile_module_from_src

SOURCE = {source!r}


def build(answer):
    return compile_module_from_src(src=SOURCE.replace("ANSWER", str(answer)), name="host_probe")


@pytest.mark.cold_compile
@pytest.mark.parametrize("i", range(3))
def test_same_source(i, cold_state):
    assert build(42).answer() == 42
    # Triton's cache is this child's own, and holds the module as after a build of its own.
    cache = Path(os.environ["TRITON_CACHE_DIR"])
    assert cache.is_relative_to(Path(cold_state.cache_dir))
    assert [p.name for p in cache.rglob("host_probe*")]


@pytest.mark.cold_compile
def test_other_source():
    assert build(7).answer() == 7
'''


@needs_modules("triton")
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_a_host_module_is_compiled_once_per_session_and_source(cold, mode, monkeypatch):
    log = cold.path / "compiler-runs.log"
    compiler = cold.path / "cc"
    compiler.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec gcc "$@"\n')
    compiler.chmod(0o755)
    monkeypatch.setenv("CC", str(compiler))
    cold.makepyfile(test_host=textwrap.dedent(TESTS.format(source=SOURCE)))

    result = run(cold, "--cold-compile", f"--cold-compile-mode={mode}", "-p", "no:randomly")

    result.assert_outcomes(passed=4)
    # One build for the three children of the same source, one for the other source.
    assert log.read_text().split() == ["run", "run"]


INSTALLATION_HASH = '''
import pytest
import triton
from triton.runtime.cache import triton_key


@pytest.mark.cold_compile
@pytest.mark.parametrize("i", range(2))
def test_hash_at_start(i):
    # Triton's hash of its installed files keys every kernel: computed once, in the server.
    assert triton_key.cache_info().currsize == 1
'''


@needs_modules("triton")
@pytest.mark.parametrize("mode", ["fork", "zygote"])
def test_tritons_installation_hash_is_computed_before_the_children_fork(cold, mode):
    cold.makepyfile(test_hash=INSTALLATION_HASH)
    run(cold, "--cold-compile", f"--cold-compile-mode={mode}").assert_outcomes(passed=2)
