"""Shared-memory caps: make Triton, Inductor and launch selectors see at most N bytes per block.

Every path that loads or sizes a kernel is lowered, so a kernel over the cap fails to load
with Triton's own OutOfResources, as it would on a device with that limit. Importing this
module imports neither torch nor triton.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from pytest_coldcompile import import_hooks
from pytest_coldcompile.protocol import SMEM_LIMIT_ENV

# Inductor's static launcher loads cubins itself, bypassing Triton's check; it moved modules.
STATIC_LAUNCHER_MODULES = (
    "torch._inductor.runtime.static_triton_launcher",  # torch >= 2.10
    "torch._inductor.runtime.static_cuda_launcher",  # older torch
)


class CappedDeviceProperties:
    """A torch.cuda device-properties object whose shared-memory sizes are lowered to the cap."""

    __slots__ = ("_limit", "_props")

    def __init__(self, props: Any, limit: int) -> None:
        object.__setattr__(self, "_props", props)
        object.__setattr__(self, "_limit", limit)

    @property
    def shared_memory_per_block_optin(self) -> int:
        # Raises AttributeError when the real object lacks it, so hasattr() stays truthful.
        return min(int(self._props.shared_memory_per_block_optin), self._limit)

    @property
    def shared_memory_per_block(self) -> int:
        return min(int(self._props.shared_memory_per_block), self._limit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._props, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._props)) | {"shared_memory_per_block_optin"})

    def __repr__(self) -> str:
        return f"{self._props!r} [shared memory capped at {self._limit} by pytest-coldcompile]"


class PatchSet:
    """Patches made now or when their module is imported; remove() undoes them all, in
    reverse order, and forgets the imports still awaited."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []
        self._pending: list[tuple[str, Callable[[ModuleType], None]]] = []

    def _on_import(self, module: str, patch: Callable[[ModuleType], None]) -> None:
        self._pending.append((module, patch))
        import_hooks.when_imported(module, patch)

    def remove(self) -> None:
        for module, patch in self._pending:
            import_hooks.forget(module, patch)
        self._pending.clear()
        while self._undo:
            self._undo.pop()()


class SmemCap(PatchSet):
    """One installed cap; remove() undoes every patch in reverse order.

    judge_loads=False lowers only what code reads as the limit, and Triton's own load checks
    see the real device (inside uncapped()): an emulated device judges loads itself.
    """

    def __init__(self, limit: int, judge_loads: bool = True) -> None:
        super().__init__()
        self.limit = int(limit)
        self.judge_loads = judge_loads
        self._real = threading.local()  # .depth > 0: inside uncapped()
        self.patched: list[str] = []  # what was capped, for tests and debugging

    @contextlib.contextmanager
    def uncapped(self) -> Iterator[None]:
        """Within: Triton's and its driver's lookups give the real device's figures."""
        self._real.depth = getattr(self._real, "depth", 0) + 1
        try:
            yield
        finally:
            self._real.depth -= 1

    def _capped(self, value: int) -> int:
        return value if getattr(self._real, "depth", 0) else min(value, self.limit)

    # -- bookkeeping -------------------------------------------------------------------------
    def _setattr(self, owner: Any, name: str, value: Any, label: str) -> None:
        # Restore exactly what the owner's own namespace held: a class attribute seen through
        # an instance must not come back as an instance attribute.
        own = getattr(owner, "__dict__", {})
        had = name in own
        old = own[name] if had else None

        def undo() -> None:
            if had:
                setattr(owner, name, old)
            else:
                delattr(owner, name)

        setattr(owner, name, value)
        self._undo.append(undo)
        self.patched.append(label)

    # -- install / remove --------------------------------------------------------------------
    def install(self) -> SmemCap:
        old_env = os.environ.get(SMEM_LIMIT_ENV)
        os.environ[SMEM_LIMIT_ENV] = str(self.limit)
        self._undo.append(lambda: _restore_env(SMEM_LIMIT_ENV, old_env))
        # Import triton now (cheap next to a test that needs a cap): its lookups are plain
        # module functions that must be capped before any kernel is loaded.
        try:
            importlib.import_module("triton.compiler.compiler")
        except ImportError:
            pass
        self._on_import("triton.compiler.compiler", self._patch_triton_compiler)
        self._on_import("triton.runtime.driver", self._patch_triton_driver)
        self._on_import("torch.cuda", self._patch_torch_cuda)
        self._on_import("torch._dynamo.device_interface", self._patch_device_interface)
        self._on_import("torch._dynamo.utils", self._patch_dynamo_constants)
        for name in STATIC_LAUNCHER_MODULES:
            self._on_import(name, self._patch_static_launcher)
        return self

    # -- the patches ---------------------------------------------------------------------------
    def _patch_triton_compiler(self, mod: ModuleType) -> None:
        limit = self.limit
        original = getattr(mod, "max_shared_mem", None)
        if original is not None:
            # The original is lru_cached: call what it wraps, or a capped value would stay
            # in its cache after the cap is removed.
            uncached = getattr(original, "__wrapped__", original)

            @functools.wraps(original)
            def max_shared_mem(device: Any) -> int:
                return self._capped(uncached(device))

            self._setattr(mod, "max_shared_mem", max_shared_mem, f"{mod.__name__}.max_shared_mem")
        if not self.judge_loads:
            return
        try:
            from triton.runtime.errors import OutOfResources
        except ImportError:
            return
        for cls in _classes_defining(mod, "_init_handles"):
            original_init = cls.__dict__["_init_handles"]

            # Refuse before Triton's own check: that one also makes the kernel object raise
            # on every later launch, which would outlive an in-process cap.
            def _init_handles(kernel: Any, _original: Any = original_init) -> Any:
                if getattr(kernel, "module", None) is None:
                    shared = int(getattr(kernel.metadata, "shared", 0) or 0)
                    if shared > limit:
                        raise OutOfResources(shared, limit, "shared memory")
                return _original(kernel)

            functools.update_wrapper(_init_handles, original_init)
            self._setattr(cls, "_init_handles", _init_handles, f"{cls.__name__}._init_handles")

    def _patch_triton_driver(self, mod: ModuleType) -> None:
        config = getattr(mod, "driver", None)
        if config is None:
            return
        # Drivers that exist now are capped now; one created later is capped on creation, so
        # installing a cap never creates the driver (that would initialize CUDA here).
        for attr in ("_active", "_default"):
            drv = getattr(config, attr, None)
            if drv is not None:
                self._cap_driver(drv)
        create = getattr(mod, "_create_driver", None)
        if create is not None:

            @functools.wraps(create)
            def _create_driver() -> Any:
                return self._cap_driver(create())

            self._setattr(
                mod, "_create_driver", _create_driver, "triton.runtime.driver._create_driver"
            )
        set_active = getattr(type(config), "set_active", None)
        if set_active is not None:

            def capped_set_active(cfg: Any, driver: Any) -> None:
                set_active(cfg, self._cap_driver(driver))

            self._setattr(config, "set_active", capped_set_active.__get__(config), "set_active")

    def _cap_driver(self, drv: Any) -> Any:
        utils = getattr(drv, "utils", None)
        get_props = getattr(utils, "get_device_properties", None)
        if get_props is None or getattr(get_props, "_coldcompile_cap", None) == self.limit:
            return drv
        limit = self.limit

        def get_device_properties(device: Any) -> dict[str, Any]:
            props = dict(get_props(device))
            if "max_shared_mem" in props:
                props["max_shared_mem"] = self._capped(int(props["max_shared_mem"]))
            return props

        get_device_properties._coldcompile_cap = limit  # type: ignore[attr-defined]
        self._setattr(
            utils,
            "get_device_properties",
            get_device_properties,
            "triton driver.utils.get_device_properties",
        )
        return drv

    def _patch_torch_cuda(self, mod: ModuleType) -> None:
        original = getattr(mod, "get_device_properties", None)
        if original is None:
            return
        limit = self.limit

        @functools.wraps(original)
        def get_device_properties(*args: Any, **kwargs: Any) -> Any:
            return CappedDeviceProperties(original(*args, **kwargs), limit)

        get_device_properties._coldcompile_cap = limit  # type: ignore[attr-defined]
        self._setattr(
            mod, "get_device_properties", get_device_properties, "torch.cuda.get_device_properties"
        )

    def _patch_device_interface(self, mod: ModuleType) -> None:
        cuda_interface = getattr(mod, "CudaInterface", None)
        torch_cuda = sys.modules.get("torch.cuda")
        if cuda_interface is not None and torch_cuda is not None:
            # The class bound torch.cuda.get_device_properties when it was defined, possibly
            # while a cap was installed: restore the unwrapped function, not what it bound.
            bound = cuda_interface.__dict__.get("get_device_properties")
            self._setattr(
                cuda_interface,
                "get_device_properties",
                staticmethod(torch_cuda.get_device_properties),
                "CudaInterface.get_device_properties",
            )
            if isinstance(bound, staticmethod):
                original = staticmethod(_unwrap(bound.__func__))
                self._undo[-1] = lambda: setattr(cuda_interface, "get_device_properties", original)
        cache = getattr(mod, "caching_worker_device_properties", None)
        if isinstance(cache, dict):
            # Inductor's workers read device properties recorded here, by the first caller:
            # drop uncapped ones now, and on removal whatever was recorded under the cap.
            had = "cuda" in cache
            saved = cache.pop("cuda", None)

            def restore() -> None:
                cache.pop("cuda", None)
                if had:
                    cache["cuda"] = saved

            self._undo.append(restore)

    def _patch_dynamo_constants(self, mod: ModuleType) -> None:
        # Dynamo treats real device-properties objects as constants; let the proxy be one too.
        constants = getattr(mod, "common_constant_types", None)
        if isinstance(constants, set) and CappedDeviceProperties not in constants:
            constants.add(CappedDeviceProperties)
            self._undo.append(lambda: constants.discard(CappedDeviceProperties))

    def _patch_static_launcher(self, mod: ModuleType) -> None:
        if not self.judge_loads:
            return
        try:
            from triton.runtime.errors import OutOfResources
        except ImportError:
            return
        limit = self.limit
        for cls in _classes_defining(mod, "load_kernel"):
            original = cls.__dict__["load_kernel"]

            def load_kernel(kernel: Any, device: int, _original: Any = original) -> None:
                shared = int(getattr(kernel, "shared", 0) or 0)
                if getattr(kernel, "function", None) is None and shared > limit:
                    raise OutOfResources(shared, limit, "shared memory")
                return _original(kernel, device)

            functools.update_wrapper(load_kernel, original)
            self._setattr(cls, "load_kernel", load_kernel, f"{cls.__name__}.load_kernel")


def _classes_defining(mod: ModuleType, method: str) -> list[type]:
    return [
        cls
        for cls in list(vars(mod).values())
        if isinstance(cls, type) and cls.__module__ == mod.__name__ and method in cls.__dict__
    ]


def _unwrap(func: Any) -> Any:
    while getattr(func, "_coldcompile_cap", None) is not None and hasattr(func, "__wrapped__"):
        func = func.__wrapped__
    return func


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def install(limit: int) -> SmemCap:
    """Cap per-block shared memory at limit bytes from now on; returns the cap for remove()."""
    return SmemCap(limit).install()
