"""What makes a process cold: private empty caches, no remote caches or PGO, no worker pools,
and no compile state from before. The environment of a spawned child is built here too.
What the children of a session share says nothing about the kernels under test: Inductor's
precompiled C++ header, its verdicts on which vector ISAs the machine's compiler can build
(``HEADER_DIR_ENV``), and Triton's host-side C modules (``host_modules``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_coldcompile import import_hooks
from pytest_coldcompile.child import host_modules
from pytest_coldcompile.child_spec import ChildSpec
from pytest_coldcompile.records import CACHES

# Already-imported config modules read their environment at import; set them directly.
# compile_threads stays 1: a worker pool costs a cold child more to start than it saves, and a
# forked one is unusable (figures: docs/design.md, "One compile thread in a cold child").
CONFIG_PATCHES: dict[str, dict[str, Any]] = {
    "torch._inductor.config": {
        "compile_threads": 1,
        "fx_graph_remote_cache": False,
        "autotune_remote_cache": False,
        "bundled_autotune_remote_cache": False,
    },
    "torch._functorch.config": {"enable_remote_autograd_cache": False},
    "torch._dynamo.config": {
        "automatic_dynamic_local_pgo": False,
        "automatic_dynamic_remote_pgo": False,
    },
    "torch.compiler.config": {
        "job_id": None,
        "pgo_extra_read_key": None,
        "pgo_extra_write_key": None,
    },
}
HEADER_DIR_ENV = "PYTEST_COLDCOMPILE_HEADER_DIR"
"""Where cold children keep Inductor's precompiled C++ headers: one directory per session,
beside the children's test directories, so only the first child of a session builds them.
Set in pytest's environment, it names a directory of the user's own instead (kept across
sessions and shared by xdist workers and nested runs: a header is named by the hash of its
content, compile command and compiler, and built under a file lock)."""

UNSET_ENV = (
    "TORCH_COMPILE_JOB_ID",
    "TORCH_COMPILE_STICKY_PGO_KEY",
    "TORCH_COMPILE_STICKY_PGO_READ",
    "TORCH_COMPILE_STICKY_PGO_WRITE",
    "TRITON_DUMP_DIR",
    "TRITON_OVERRIDE_DIR",
)


def cache_env(test_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Environment that points every compile cache of the child into test_dir and turns off
    what is shared beyond it (remote caches, PGO, worker pools)."""
    caches = Path(test_dir) / CACHES
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "TRITON_CACHE_DIR": str(caches / "triton" / "cache"),
        "TRITON_HOME": str(caches / "triton"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        HEADER_DIR_ENV: os.environ.get(HEADER_DIR_ENV) or shared_header_dir(test_dir),
        "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "0",
        "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "0",
        "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE": "0",
        "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE": "0",
        "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO": "0",
        "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_REMOTE_PGO": "0",
    }


def shared_header_dir(test_dir: str | os.PathLike[str]) -> str:
    """The session's header directory: beside the test directories, under the engine's base
    temporary directory (removed with it at the end of the session). What it saves:
    docs/design.md, "What cold children share". Sharing is safe: Inductor names a header by
    the hash of its content, compile command and compiler, and builds it under a file lock.
    """
    return str(Path(test_dir).resolve().parent / "precompiled_headers")


def child_environ(test_dir: str, spec: ChildSpec, base: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in UNSET_ENV}
    env.update(cache_env(test_dir))
    visible = spec.get("cuda_visible_devices")
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


def _patch_config(module_name: str, values: dict[str, Any]) -> None:
    def patch(mod: ModuleType) -> None:
        for key, value in values.items():
            if hasattr(mod, key):
                setattr(mod, key, value)

    import_hooks.when_imported(module_name, patch)


def triton_kernels(paths: Iterable[str]) -> set[str]:
    """"<hash>/<kernel name>" of each kernel among paths under a Triton cache directory: Triton
    writes <hash>/<kernel name>.json for each kernel it compiles (and __grp__ files beside)."""
    found = set()
    for path in paths:
        parts = path.split("/")
        if len(parts) == 2 and parts[1].endswith(".json") and not parts[1].startswith("__grp__"):
            found.add(f"{parts[0]}/{parts[1][:-5]}")
    return found


def _private_triton_dirs(caches: str) -> None:
    def patch(knobs: ModuleType) -> None:
        cache = getattr(knobs, "cache", None)
        if cache is None:
            return
        # Explicit values win over any set before the fork; env alone would not override them.
        home = os.path.join(caches, "triton")
        for name, value in (
            ("home_dir", home),
            ("dir", os.path.join(home, "cache")),
            ("dump_dir", os.path.join(home, ".triton", "dump")),
            ("override_dir", os.path.join(home, ".triton", "override")),
        ):
            if hasattr(cache, name):
                setattr(cache, name, value)

    import_hooks.when_imported("triton.knobs", patch)


def _header_dir(caches: str) -> str:
    """Where this child keeps what the session's children share: the session's directory,
    else (no session, e.g. a child made by hand) its own."""
    return os.environ.get(HEADER_DIR_ENV) or os.path.join(caches, "inductor",
                                                           "precompiled_headers")


def _private_header_dir(caches: str) -> None:
    # Inductor keeps precompiled C++ headers in the default cache dir on purpose ("global");
    # a cold child must not write there: it uses the session's directory, else its own.
    header_dir = _header_dir(caches)

    def patch(codecache: ModuleType) -> None:
        if hasattr(codecache, "_HEADER_DIR"):
            codecache._HEADER_DIR = header_dir  # type: ignore[attr-defined]
            codecache._HEADER_LOCK_DIR = os.path.join(header_dir, "locks")  # type: ignore[attr-defined]

    import_hooks.when_imported("torch._inductor.codecache", patch)


VEC_ISA_DIR = "vec_isa"
"""Where, in the session's header directory, cold children keep Inductor's verdicts on which
vector ISAs the machine's compiler can build and load (``_shared_vec_isa_verdicts``)."""


def _shared_vec_isa_verdicts(caches: str) -> None:
    """Share Inductor's vector-ISA checks between the children of a session.

    Before its first C++ kernel, Inductor compiles a probe library for each vector ISA the
    CPU reports and loads it in a fresh interpreter, in the cache: 8.8-9.3 s on the 2-core CPU
    in an empty cache, in every cold child that compiles for the CPU. A verdict depends on the
    probe's code, the ISA's flags, the compiler and torch (Inductor's own key for the probe)
    and says nothing about the kernels under test. The first child of a session checks as
    Inductor does, in its private cache, and records each verdict beside the shared headers;
    the next ones read it.
    """
    verdicts = os.path.join(_header_dir(caches), VEC_ISA_DIR)

    def patch(module: ModuleType) -> None:
        isa_class: Any = getattr(module, "VecISA", None)
        check_build: Any = getattr(isa_class, "check_build", None)
        fingerprint = getattr(module, "_get_isa_dry_compile_fingerprint", None)
        if check_build is None or fingerprint is None or getattr(
            check_build, "_coldcompile_shared", False
        ):
            return  # another torch: every child checks for itself

        @functools.wraps(check_build)
        def shared_check_build(isa: Any, code: str) -> bool:
            key = hashlib.sha256(
                f"{code}\0{fingerprint(isa.build_arch_flags())}".encode()
            ).hexdigest()
            path = os.path.join(verdicts, f"{key}.json")
            try:
                with open(path) as f:
                    return bool(json.load(f)["builds"])
            except (OSError, ValueError, KeyError, TypeError):
                pass
            builds = bool(check_build(isa, code))
            try:  # atomically: children of xdist workers may check at once
                os.makedirs(verdicts, exist_ok=True)
                with tempfile.NamedTemporaryFile("w", dir=verdicts, delete=False,
                                                 suffix=".tmp") as written:
                    json.dump({"isa": str(isa), "builds": builds}, written)
                os.replace(written.name, path)
            except OSError:
                pass  # unshared, still correct
            return builds

        shared_check_build._coldcompile_shared = True  # type: ignore[attr-defined]
        isa_class.check_build = shared_check_build

    import_hooks.when_imported("torch._inductor.cpu_vec_isa", patch)


# The fork server does not import torch's compile stack (Dynamo, Inductor) for its children:
# importing torch._dynamo.package calls Inductor's cache_dir(), which creates the cache
# directory and writes its path into TORCHINDUCTOR_CACHE_DIR; in the server that is the user's
# default location, which nothing of a cold run may touch. A child forked ahead imports it
# itself instead, once its caches are private, while the test before it runs
# (warm_compile_stack).
COMPILE_STACK = ("torch._dynamo", "torch._functorch.aot_autograd", "torch._inductor.compile_fx")


def warm_compile_stack() -> bool:
    """Import torch's compile stack and compute the installation hashes that Inductor and
    Triton key every cache entry with; False where that failed (the test meets the same error
    when it compiles, and reports it there).

    What a cold child's first ``torch.compile`` would do before compiling anything: 2.1 s of
    imports and 0.5 s of hashing torch's and Triton's installed files on the 2-core CPU. Call it
    only after ``make_private``: nothing is compiled, no cache entry is read or written (the
    import makes the child's private Inductor directory, as a first compile would), and the
    child stays cold; a child forked ahead does it while the test before it runs.
    """
    import importlib

    try:
        for name in COMPILE_STACK:
            importlib.import_module(name)
        from torch._inductor.codecache import torch_key

        torch_key()
    except Exception:
        return False
    try:
        from triton.runtime.cache import triton_key
    except ImportError:  # Inductor without Triton (a CPU-only install)
        return True
    try:
        triton_key()
    except Exception:
        return False
    return True


def hash_installation() -> None:
    """In a server, before it forks: Triton's hash of its installed files (``triton_key``,
    which keys every kernel's cache entry), where Triton is imported.

    A child's first kernel compile would hash them itself: 0.3 s on the 2-core CPU, most of
    that compile. The hash reads Triton's files and touches no cache; the children inherit it
    as later tests in-process find it computed."""
    if "triton" not in sys.modules:
        return
    try:
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:
        pass  # each child meets (and reports) the failure at its first compile


def reset_compiler_state() -> None:
    """Forget compile state that existed before the child began (e.g. made at collection)."""
    dynamo = sys.modules.get("torch._dynamo")
    counters = getattr(sys.modules.get("torch._dynamo.utils"), "counters", None)
    # reset() calls torch.cuda.is_available(): skip it when Dynamo has seen no frame at all.
    if dynamo is not None and (counters is None or counters["frames"]["total"]):
        dynamo.reset()
    async_compile = sys.modules.get("torch._inductor.async_compile")
    pool_owner: Any = getattr(async_compile, "AsyncCompile", None)
    for name in ("pool", "process_pool"):
        cached: Any = getattr(pool_owner, name, None)
        # A pool inherited through fork has its threads in another process; forget it.
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()


def make_private(caches: str) -> None:
    """Point the compile configuration of this process at caches, now or when it is imported."""
    for module_name, values in CONFIG_PATCHES.items():
        _patch_config(module_name, values)
    _private_triton_dirs(caches)
    _private_header_dir(caches)
    _shared_vec_isa_verdicts(caches)
    host_modules.share_builds(os.path.join(_header_dir(caches), host_modules.HOST_MODULE_DIR))


@contextmanager
def scratch_caches() -> Iterator[None]:
    """Caches of a scratch directory for imports in a server (a zygote's preload, shared
    first-use imports), removed after it.

    Some modules write to their cache directory as they are imported: torch._dynamo's import
    creates Inductor's and writes its path into TORCHINDUCTOR_CACHE_DIR, which would be the
    user's default location here. Nothing such an import makes is for the children, which start
    from their own environment and private caches."""
    scratch = tempfile.mkdtemp(prefix="pytest-coldcompile-scratch-")
    scratch_env = {name: value for name, value in cache_env(scratch).items()
                   if name != HEADER_DIR_ENV}
    saved = {name: os.environ.get(name) for name in scratch_env}
    os.environ.update(scratch_env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(scratch, ignore_errors=True)
