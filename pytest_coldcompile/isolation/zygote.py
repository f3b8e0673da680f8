"""The zygote: a fork server forked from pytest before any conftest or test module is imported.

Asked to, it imports the cold_compile_preload modules (by default torch and triton, where
installed) once, never CUDA, and forks one child per cold test, which re-collects its test by
node id as a spawned child does.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import traceback
from typing import Any, NoReturn

import pytest

from pytest_coldcompile import options
from pytest_coldcompile.child import pristine, shared_imports
from pytest_coldcompile.devices import cuda
from pytest_coldcompile.isolation.forkserver import ForkServer
from pytest_coldcompile.processes import exit_now
from pytest_coldcompile.records import redirect_std_fds

ZYGOTE_KEY = pytest.StashKey["Zygote"]()
# Why start_early did not fork one, where the reason is worth telling.
NOT_STARTED_KEY = pytest.StashKey[str]()

# Bytes on the preload pipe: import the preload modules, or serve without them.
_PRELOAD, _BARE = b"p", b"n"


class Zygote:
    """Parent-side handle; the server is a ForkServer whose children run pytest.main."""

    def __init__(self, modules: list[str]) -> None:
        self.modules = list(modules)
        self.server: ForkServer | None = None
        self._go_read: int | None = None
        self._go_write: int | None = None  # the parent's end: one byte says whether to preload

    def start(self) -> None:
        self._go_read, self._go_write = os.pipe()
        self.server = ForkServer(_child_main, preload=self._preload,
                                 after_child=shared_imports.after_child)
        sys.stdout.flush()
        sys.stderr.flush()
        self.server.start()
        os.close(self._go_read)  # the server's end
        self._go_read = None

    def preload(self) -> None:
        """Ask the server to import its modules before it serves; idempotent."""
        self._answer(_PRELOAD)

    def stop(self) -> None:
        """End the server; idempotent. One still waiting for the preload decision (a session
        that ran no cold test) has served nothing: it is killed, where told to go on it would
        fork its first spare child only to be asked to exit."""
        if self.server is not None and self._go_write is not None:
            self.server.kill()  # before the pipe closes: an end of file would wake it
            self.server = None
            os.close(self._go_write)
            self._go_write = None
            return
        self._answer(_BARE)
        if self.server is not None:
            self.server.stop()
            self.server = None

    def alive(self) -> bool:
        return self.server is not None and self.server.pid is not None

    def _answer(self, answer: bytes) -> None:
        if self._go_write is None:
            return
        try:
            os.write(self._go_write, answer)
        except OSError:
            pass  # the server is gone; run() will say so
        os.close(self._go_write)
        self._go_write = None

    # -- server side ---------------------------------------------------------------------
    def _preload(self) -> None:
        # Runs in the server before it reads any request: the parent decides once collection
        # tells it whether the zygote is needed at all.
        assert self._go_read is not None
        assert self._go_write is not None
        os.close(self._go_write)
        answer = os.read(self._go_read, 1)
        os.close(self._go_read)
        if answer != _PRELOAD:
            return
        _assign_gpu()
        failed = []
        with pristine.scratch_caches():
            for name in self.modules:
                try:
                    importlib.import_module(name)
                except Exception:
                    failed.append(f"import {name}:\n{traceback.format_exc()}")
        pristine.hash_installation()
        # What is here now lives as long as the zygote: out of the collector's sight, each
        # child's pytest.main skips it in its gc passes (half a second per child with torch
        # loaded) and does not copy its pages by touching their reference counts.
        gc.freeze()
        if failed:
            raise ImportError("cold_compile_preload: " + "\n".join(failed))


def _assign_gpu() -> None:
    """Under xdist, worker gwK's zygote (and so all its children) sees GPU K mod n only."""
    if cuda.xdist_worker_index() is None:
        return
    gpu = cuda.gpu_for_worker(len(cuda.facts().gpus))  # a probe subprocess, not CUDA here
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu[0]


def _child_main(request: dict[str, Any]) -> NoReturn:
    """In the forked child: become a spawned cold child, without the exec."""
    code = 1
    try:
        test_dir = request["spec"]["dir"]
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _redirect(test_dir)
        if request.get("preload_error"):
            sys.stderr.write(f"pytest-coldcompile zygote: {request['preload_error']}\n")
        _forget_the_early_config()
        before = shared_imports.modules_now()
        code = int(pytest.main(request["args"]))
        shared_imports.write_imported(test_dir, before)  # for the zygote to share
    except BaseException:
        traceback.print_exc()
    finally:
        exit_now(code)


def _redirect(test_dir: str) -> None:
    """stdin from /dev/null, stdout and stderr to the raw files a spawned child writes."""
    redirect_std_fds(test_dir)
    # sys.stdout may still be the parent's early capture file; a fresh pytest captures these.
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)


def _forget_the_early_config() -> None:
    """The parent's early config installed an assertion-rewriting hook; pytest.main installs
    its own. Modules imported before the fork (plugins, preloads) were handled there, so
    pytest's "already imported, cannot be rewritten" warnings would be noise (and errors
    under -W error) that a spawned child never sees."""
    from _pytest.assertion.rewrite import AssertionRewritingHook

    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, AssertionRewritingHook)]
    AssertionRewritingHook._warn_already_imported = lambda self, name: None  # type: ignore[method-assign]


def start_early(config: pytest.Config) -> Zygote | None:
    """The zygote for this pytest process, forked now, or None where it cannot be needed.

    Called from pytest_load_initial_conftests, before any conftest or test module is imported.
    It waits for the parent's decision before importing anything; `--cold-compile-mode=zygote`
    decides at once.
    """
    ns = config.known_args_namespace
    if not hasattr(os, "fork") or getattr(ns, "cold_compile_child", None):
        return None
    if getattr(ns, "help", False) or getattr(ns, "version", False):
        return None
    if getattr(ns, "collectonly", False):
        return None
    if os.environ.get("PYTEST_XDIST_WORKER") is None and (
        getattr(ns, "numprocesses", None) or getattr(ns, "tx", None)
    ):
        return None  # an xdist controller runs no test; each worker starts its own
    try:
        mode, _, cold_all = options.early_mode(config)
        modules = options.preload_modules(config)
        answering = options.answer_device_queries(config)
    except pytest.UsageError:
        return None  # pytest_configure reports it
    if mode in ("fork", "spawn"):
        return None
    if cuda.cuda_driver_initialized():
        # An earlier pytest run in this process (pytester's inline runs, a GPU test run
        # in-process) initialized CUDA: a zygote forked now could not use it.
        config.stash[NOT_STARTED_KEY] = (
            "this process had initialized the CUDA driver before the zygote could fork"
        )
        return None
    zygote = Zygote(modules)
    zygote.start()
    # It imports while pytest collects: at once when asked for, and in an `auto` run of every
    # test cold on a machine with an NVIDIA driver where collection's device queries are not
    # answered (devices/device_queries.py), so that collection is likely to initialize CUDA and
    # waiting would put the imports in the first cold test (docs/design.md, "The zygote").
    # Answered, collection rarely initializes CUDA, and the imports would compete with it.
    if mode == "zygote" or (cold_all and not answering and os.path.exists(cuda.NVIDIA_CONTROL)):
        zygote.preload()
    return zygote


LATE_REGISTRATION = "the plugin was registered after the initial conftests were loaded"


def not_started(config: pytest.Config) -> str:
    """Why this process has no zygote, as far as start_early knows."""
    return config.stash.get(NOT_STARTED_KEY, LATE_REGISTRATION)


def of(config: pytest.Config) -> Zygote | None:
    """This process's zygote, when one is running."""
    zygote = config.stash.get(ZYGOTE_KEY, None)
    return zygote if zygote is not None and zygote.alive() else None
