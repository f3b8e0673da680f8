"""First-use imports shared by a fork server: the installed modules a cold child imported while
it ran (numpy, Triton's interpreter, torch.testing's lazy imports), written down by the child
and imported once by its server, so the next children inherit them as later tests in-process do.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import sysconfig
from collections.abc import Callable, Iterable
from typing import Any

from pytest_coldcompile.child import pristine
from pytest_coldcompile.devices import cuda

IMPORTED = "imported-modules.json"
"""In a cold test's directory: the modules its child imported that its server may share."""

# Never imported in a server: the compile stack writes to Inductor's default cache directory
# as it is imported (pristine.COMPILE_STACK; a child imports it once its caches are private),
# and a driver module may load CUDA, which a fork server must never initialize.
_NEVER = ("torch._dynamo", "torch._inductor", "torch._functorch", "torch.cuda",
          "triton.backends", "triton.runtime.driver", "triton.runtime.build")
_NEVER_WORDS = ("cuda", "nvidia", "nvml", "cupy")

_MAX_SHARED = 5000  # a bound on what one child can ask its server to import


def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots)


def _never(name: str) -> bool:
    return (name == "__main__" or any(name == n or name.startswith(n + ".") for n in _NEVER)
            or any(word in name.lower() for word in _NEVER_WORDS))


def _installed(module: Any, roots: tuple[str, ...]) -> bool:
    """An installed module (the standard library or site-packages), never the project's own
    code, whose state may be under test; built-in and namespace modules save nothing."""
    path = getattr(module, "__file__", None)
    return isinstance(path, str) and os.path.realpath(path).startswith(roots)


class ModulesMark:
    """Where sys.modules ended when a child's test began (``modules_now``).

    A module enters sys.modules at its end, so what a test imported lies after the mark; the
    names are found from the end back (``since``), never by walking every module: a forked
    child that touches an object copies the server's page that holds it."""

    def __init__(self) -> None:
        self.count = len(sys.modules)
        self.last = next(reversed(sys.modules), None)

    def since(self) -> list[str]:
        """The names that entered sys.modules after the mark, in import order."""
        if len(sys.modules) == self.count and next(reversed(sys.modules), None) == self.last:
            return []
        added = []
        for name in reversed(sys.modules):
            if name == self.last:
                break
            added.append(name)
        added.reverse()
        return added


def modules_now() -> ModulesMark:
    """The end of sys.modules now: what a child has before its test."""
    return ModulesMark()


def write_imported(test_dir: str, before: ModulesMark | Iterable[str]) -> None:
    """Write down, in test_dir, the installed modules imported since before (a mark, or the
    names there were), in import order, up to the first one a server must never import.
    Nothing where this child initialized the CUDA driver: any of its imports may have done
    it (a library asking the device's capability as it is imported), and a server that
    imported it could fork no usable child again.

    A module listed may still have imported a never-module (a module enters sys.modules before
    its body runs): the server imports under scratch caches (``import_all``), as a zygote does
    its preloads, so even the compile stack then touches none of the user's directories."""
    if isinstance(before, ModulesMark):
        added = before.since()
    else:
        seen = set(before)
        added = [name for name in list(sys.modules) if name not in seen]
    if not added or cuda.cuda_driver_initialized():
        return
    roots = _installed_roots()
    names = []
    for name in added:
        if _never(name):
            break
        module = sys.modules.get(name)
        if module is not None and _installed(module, roots):
            names.append(name)
    if not names:
        return
    path = os.path.join(test_dir, IMPORTED)
    with open(path + ".tmp", "w") as f:
        json.dump(names[:_MAX_SHARED], f)
    os.replace(path + ".tmp", path)


def read_imported(test_dir: str) -> list[str]:
    """What the child of test_dir wrote down (write_imported); empty where nothing."""
    try:
        with open(os.path.join(test_dir, IMPORTED)) as f:
            names = json.load(f)
    except (OSError, ValueError):
        return []
    if not isinstance(names, list):
        return []
    return [n for n in names[:_MAX_SHARED] if isinstance(n, str) and not _never(n)]


def import_all(names: list[str]) -> bool:
    """In a fork server: import names not imported yet; True when any was. A module that
    fails to import is left to the children, which meet the error themselves."""
    added = False
    with pristine.scratch_caches():  # the server's cache locations are the user's
        for name in names:
            if name in sys.modules:
                continue
            try:
                importlib.import_module(name)
            except (Exception, SystemExit):
                continue
            added = True
    if added:
        gc.freeze()  # as after the server's preload: children skip it in their gc passes
    return added


def after_child(request: dict[str, Any]) -> Callable[[], bool] | None:
    """A fork server's step after each child (``ForkServer(after_child=...)``): the work of
    importing, here, the installed modules the ended child imported, in that child's
    environment where the request carries one (a zygote's); None where it imported none."""
    names = read_imported(str(request.get("spec", {}).get("dir", "")))
    if not names:
        return None
    env = request.get("env")

    def share() -> bool:
        if not env:
            return import_all(names)
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            return import_all(names)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    return share
