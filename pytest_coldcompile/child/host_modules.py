"""Triton's host-side C modules, built once per session and shared by its cold children.

Before its first kernel launch, Triton builds its driver's C utilities (``cuda_utils``,
``hip_utils``) with the system's C compiler into its cache (``triton.runtime.build``): about a
second in every cold child, whose Triton cache is private and empty. Such a module is the
driver's host code: built from Triton's own C source with the same flags in every child, it
holds no device code and no resource figure, and says nothing about the kernels under test.
The first child of a session builds it as Triton does; the next ones take a copy of that
build. Triton still finds its private cache empty, and still writes the module into it, as
it would after a build: only the compiler's run is skipped.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import shutil
import sys
import tempfile
from types import ModuleType
from typing import Any

from pytest_coldcompile import import_hooks

HOST_MODULE_DIR = "triton_host_modules"
"""Where, in the session's shared directory (``pristine.shared_header_dir``), the children
keep the host modules that Triton built."""


def _build_key(bound: inspect.BoundArguments) -> str | None:
    """What a build's output depends on: the C source's text, every other argument except
    the scratch directory, the compiler Triton would pick (CC), and the interpreter."""
    arguments = dict(bound.arguments)
    src, srcdir = arguments.pop("src", None), arguments.pop("srcdir", None)
    if not isinstance(src, str) or not isinstance(srcdir, str):
        return None
    try:
        with open(src, "rb") as f:
            text = f.read()
    except OSError:
        return None
    fields = [repr(sorted(arguments.items())), os.environ.get("CC", ""), sys.version,
              sys.executable]
    digest = hashlib.sha256(text)
    for field in fields:
        digest.update(b"\0" + field.encode())
    return digest.hexdigest()


def share_builds(shared_dir: str) -> None:
    """Share the host modules Triton builds among the children of a session, from now on or
    once ``triton.runtime.build`` is imported."""

    def patch(module: ModuleType) -> None:
        build: Any = getattr(module, "_build", None)
        if build is None or getattr(build, "_coldcompile_shared", False):
            return
        try:
            signature = inspect.signature(build)
        except (TypeError, ValueError):
            return  # another Triton: every child builds for itself

        @functools.wraps(build)
        def shared_build(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return build(*args, **kwargs)
            key = _build_key(bound)
            if key is None:
                return build(*args, **kwargs)
            built = build_from_share(shared_dir, key, str(bound.arguments["srcdir"]))
            if built is not None:
                return built
            output = build(*args, **kwargs)
            keep_in_share(shared_dir, key, output)
            return output

        shared_build._coldcompile_shared = True  # type: ignore[attr-defined]
        module._build = shared_build  # type: ignore[attr-defined]

    import_hooks.when_imported("triton.runtime.build", patch)


def build_from_share(shared_dir: str, key: str, srcdir: str) -> str | None:
    """A copy, in srcdir, of the module built under key earlier in the session; None if
    there is none."""
    entry = os.path.join(shared_dir, key)
    try:
        names = os.listdir(entry)
    except OSError:
        return None
    if len(names) != 1:
        return None
    copy = os.path.join(srcdir, names[0])
    try:
        shutil.copyfile(os.path.join(entry, names[0]), copy)
    except OSError:
        return None
    return copy


def keep_in_share(shared_dir: str, key: str, output: Any) -> None:
    """Keep the module a child built under key, atomically: xdist workers' children may build
    at once. Unshared (and still correct) where that fails."""
    if not isinstance(output, str) or not os.path.isfile(output):
        return
    entry = os.path.join(shared_dir, key)
    if os.path.isdir(entry):
        return
    try:
        os.makedirs(shared_dir, exist_ok=True)
        staging = tempfile.mkdtemp(dir=shared_dir, prefix=".staging-")
    except OSError:
        return
    try:
        shutil.copyfile(output, os.path.join(staging, os.path.basename(output)))
        os.rename(staging, entry)  # fails where another child kept it first
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
