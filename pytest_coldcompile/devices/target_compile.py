"""Compiling a kernel again for another GPU architecture, with Triton's own pieces: the options
its caller chose, the source and specialization of an interpreted launch, the registers its
cubin declares. No GPU driver is needed; triton is imported when first used.
"""

from __future__ import annotations

import contextlib
import functools
import os
import struct
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from typing import Any


class UnsupportedTarget(RuntimeError):
    """The installed Triton cannot compile for the emulated device's architecture."""


def gpu_target(arch: int, warp_size: int) -> Any:
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", arch, warp_size)


@functools.cache
def unsupported(arch: int) -> str | None:
    """Why this Triton cannot compile for sm_<arch>, or None when it can: the ptxas Triton
    would run for it must list the architecture among its --gpu-name values."""
    try:
        from triton.backends.nvidia import compiler as nvidia
    except ImportError as exc:
        return f"Triton's NVIDIA backend is not installed ({exc})"
    import triton

    name = nvidia.sm_arch_from_capability(arch)
    try:
        path = nvidia.get_ptxas(arch).path
        text = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return f"Triton {triton.__version__} found no ptxas for {name} ({exc})"
    if f"'{name}'" not in text:
        return (f"Triton {triton.__version__} cannot target {name}: its ptxas ({path}) does "
                f"not list {name} among its --gpu-name values")
    return None


def _tuples(value: Any) -> Any:
    # A kernel's metadata went through JSON: its tuples came back as lists.
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def chosen_options(metadata: Any) -> dict[str, Any]:
    """The compile options a kernel's caller chose, read from its compiled metadata: those
    that differ from what its backend picks by itself. The options Triton derives from the
    architecture (arch, fp8 types, ...) are left for the other target's backend to derive."""
    from triton.compiler.compiler import make_backend

    backend = make_backend(metadata.target)
    defaults = backend.parse_options({}).__dict__
    given = metadata._asdict()
    return {k: given[k] for k in defaults if k in given and _tuples(given[k]) != defaults[k]}


@contextlib.contextmanager
def _temporaries_in(directory: str | None) -> Iterator[None]:
    # ptxas's input and log are temporary files: keep them under the child's private cache.
    if directory is None:
        yield
        return
    os.makedirs(directory, exist_ok=True)
    saved = tempfile.tempdir
    tempfile.tempdir = directory
    try:
        yield
    finally:
        tempfile.tempdir = saved


def compile_for(src: Any, options: dict[str, Any], target: Any,
                scratch: str | None = None) -> Any:
    """triton.compile of src for target with options; never loaded (no driver involved)."""
    from triton.compiler.compiler import compile as triton_compile

    with _temporaries_in(scratch), _pristine_language():
        return triton_compile(src, target=target, options=dict(options))


_REGCOUNT = 0x2F  # EIATTR_REGCOUNT in a cubin's .nv.info section: (function, registers)
_SVAL, _HVAL, _BVAL = 0x04, 0x03, 0x02  # attribute formats: sized, 2-byte, 1-byte values


def registers(cubin: bytes) -> int | None:
    """Registers per thread the cubin's kernel uses, as ptxas recorded them; None if unread.

    Read from the ELF's .nv.info attributes, where the driver reads them when it loads the
    kernel (what Triton then reports as n_regs)."""
    try:
        shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
        entsize, count, names = struct.unpack_from("<HHH", cubin, 0x3A)
        sections = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * entsize)
                    for i in range(count)]
        strings = sections[names][4]
        found = []
        for name, _, _, _, offset, size in sections:
            label = cubin[strings + name: cubin.index(b"\0", strings + name)]
            if not label.startswith(b".nv.info"):
                continue
            at = offset
            while at < offset + size:
                form, attr = cubin[at], cubin[at + 1]
                at += 2
                if form == _SVAL:
                    length = struct.unpack_from("<H", cubin, at)[0]
                    if attr == _REGCOUNT:
                        found.append(struct.unpack_from("<II", cubin, at + 2)[1])
                    at += 2 + length
                elif form == _HVAL:
                    at += 2
                elif form == _BVAL:
                    at += 1
        return max(found) if found else None
    except (struct.error, ValueError, IndexError):
        return None


# -- interpreted launches ----------------------------------------------------------------------


@functools.cache
def _compilable_function() -> type:
    from triton.runtime.jit import JITFunction

    class CompilableFunction(JITFunction):
        """A JITFunction made from an interpreted kernel's Python function, so that Triton's
        compiler can compile what the interpreter runs; the @jit functions it calls are seen
        as JITFunctions too."""

        def get_capture_scope(self) -> dict[str, Any]:
            return {k: as_jit(v) for k, v in super().get_capture_scope().items()}

    return CompilableFunction


@functools.cache
def _interpreted_function() -> type:
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction


_compilable: dict[int, tuple[Any, Any]] = {}


def as_jit(value: Any) -> Any:
    """value, or the JITFunction of value when it is an interpreted @triton.jit function."""
    interpreted: Any = _interpreted_function()
    if not isinstance(value, interpreted):
        return value
    held = _compilable.get(id(value))
    if held is None or held[0] is not value:
        held = (value, _compilable_function()(value.fn, **value.kwargs))
        _compilable[id(value)] = held
    return held[1]


_MISSING = object()
# (id(owner), name) -> (owner, name, the owner's own value before the interpreter patched it)
_language_originals: dict[tuple[int, str], tuple[Any, str, Any]] = {}


def _set_own(owner: Any, name: str, value: Any) -> None:
    if value is _MISSING:
        if name in vars(owner):
            delattr(owner, name)
    else:
        setattr(owner, name, value)


def track_language_patches() -> Callable[[], None]:
    """Record what the interpreter's language patches replace. A @jit helper called inside an
    interpreted kernel (tl.cdiv, say) patches triton.language for good (the interpreter's
    InterpretedFunction.__call__ never restores it); a later target compile needs the
    language as the compiler knows it. Returns the undo."""
    from triton.runtime import interpreter

    scope = getattr(interpreter, "_LangPatchScope", None)
    if scope is None or "set_attr" not in scope.__dict__:
        return lambda: None  # a Triton whose interpreter patches otherwise: nothing recorded
    original = scope.__dict__["set_attr"]

    def set_attr(self: Any, obj: object, name: str, value: object) -> None:
        key = (id(obj), name)
        if key not in _language_originals:
            _language_originals[key] = (obj, name, vars(obj).get(name, _MISSING))
        original(self, obj, name, value)

    scope.set_attr = functools.wraps(original)(set_attr)
    return lambda: setattr(scope, "set_attr", original)


@contextlib.contextmanager
def _pristine_language() -> Iterator[None]:
    changed = []
    for owner, name, pristine in list(_language_originals.values()):
        current = vars(owner).get(name, _MISSING)
        if current is not pristine:
            changed.append((owner, name, current))
            _set_own(owner, name, pristine)
    try:
        yield
    finally:
        for owner, name, current in reversed(changed):
            _set_own(owner, name, current)


def see_interpreted_as_jit() -> Callable[[], None]:
    """Make Triton's compiler front end (its code generator and the dependency finder that
    makes a kernel's cache key) see interpreted @jit functions, ``tl.cdiv`` and the user's
    own helpers, as JITFunctions. Returns the undo."""
    from triton.compiler import code_generator
    from triton.runtime import jit

    undo: list[Callable[[], None]] = []

    def wrap(cls: type, name: str, make: Callable[[Any], Any]) -> None:
        original = cls.__dict__[name]
        setattr(cls, name, functools.wraps(original)(make(original)))
        undo.append(lambda: setattr(cls, name, original))

    def mapped_result(original: Any) -> Any:
        return lambda self, node: as_jit(original(self, node))

    def mapped_reference(original: Any) -> Any:
        return lambda self, val, *args, **kwargs: original(self, as_jit(val), *args, **kwargs)

    for cls in (code_generator.CodeGenerator, jit.DependenciesFinder):
        wrap(cls, "visit_Name", mapped_result)
        wrap(cls, "visit_Attribute", mapped_result)
    wrap(jit.DependenciesFinder, "record_reference", mapped_reference)

    def remove() -> None:
        while undo:
            undo.pop()()

    return remove


class LaunchCompiler:
    """Turns an interpreted launch into what JITFunction.run would compile for a target:
    Triton's own binder, specialization, cache key and argument packing."""

    def __init__(self, target: Any) -> None:
        from triton.compiler.compiler import make_backend

        self.target = target
        self.backend = make_backend(target)
        self._binders: dict[int, tuple[Any, Any, dict[Any, str]]] = {}

    def source(self, interpreted: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> tuple[str, Any, dict[str, Any]]:
        """(cache key, ASTSource, options) of this launch, as JITFunction.run makes them."""
        from triton import knobs
        from triton.compiler.compiler import ASTSource
        from triton.runtime.jit import compute_cache_key, create_function_from_signature

        fn = as_jit(interpreted)
        if id(fn) not in self._binders:
            binder = create_function_from_signature(fn.signature, fn.params, self.backend)
            self._binders[id(fn)] = (fn, binder, {})
        fn, binder, key_cache = self._binders[id(fn)]
        kwargs = dict(kwargs)
        kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        bound, specialization, options = binder(*args, **kwargs)
        key = f"{fn.cache_key}-{compute_cache_key(key_cache, specialization, options)}"
        options, signature, constexprs, attrs = fn._pack_args(
            self.backend, kwargs, bound, specialization, options)
        return key, ASTSource(fn, signature, constexprs, attrs), options.__dict__
